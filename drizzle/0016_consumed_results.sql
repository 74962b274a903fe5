CREATE TABLE "consumed_results" (
	"jti" text PRIMARY KEY NOT NULL,
	"expires_at" timestamp with time zone NOT NULL,
	"api_key_id" text NOT NULL,
	"consumed_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE INDEX "consumed_results_expires_at_idx" ON "consumed_results" USING btree ("expires_at");