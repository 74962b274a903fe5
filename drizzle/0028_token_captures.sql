CREATE TABLE "token_captures" (
	"id" text PRIMARY KEY NOT NULL,
	"verified_at" timestamp with time zone NOT NULL,
	"mode" text NOT NULL,
	"api_key_id" text NOT NULL,
	"app_scope" jsonb,
	"nonce" "bytea" NOT NULL,
	"service" text,
	"app" text,
	"valid" boolean NOT NULL,
	"reason" text,
	"detail" text,
	"checks" jsonb NOT NULL,
	"policy" jsonb,
	"token" "bytea" NOT NULL,
	"token_bytes" integer NOT NULL,
	"master_key_id" text
);
--> statement-breakpoint
CREATE INDEX "token_captures_mode_verified_at_idx" ON "token_captures" USING btree ("mode","verified_at");--> statement-breakpoint
CREATE INDEX "token_captures_verified_at_idx" ON "token_captures" USING btree ("verified_at");