CREATE TABLE "result_signing_keys" (
	"id" text PRIMARY KEY NOT NULL,
	"public_key" "bytea" NOT NULL,
	"private_key" "bytea" NOT NULL,
	"master_key_id" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"signing_from" timestamp with time zone NOT NULL
);
--> statement-breakpoint
ALTER TABLE "api_keys" ADD COLUMN "result_tokens" boolean DEFAULT false NOT NULL;--> statement-breakpoint
CREATE INDEX "result_signing_keys_signing_from_idx" ON "result_signing_keys" USING btree ("signing_from");