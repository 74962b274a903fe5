CREATE TABLE "apple_credentials" (
	"team_id" text PRIMARY KEY NOT NULL,
	"key_id" text NOT NULL,
	"private_key" "bytea" NOT NULL,
	"master_key_id" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"rejected_at" timestamp with time zone
);
--> statement-breakpoint
ALTER TABLE "apple_apps" ADD COLUMN "require_receipt" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "apple_apps" ADD COLUMN "max_risk_metric" integer;--> statement-breakpoint
ALTER TABLE "apple_apps" ADD COLUMN "validation_categories" text[] DEFAULT '{}'::text[] NOT NULL;--> statement-breakpoint
ALTER TABLE "apple_apps" ADD COLUMN "min_bundle_version" text;--> statement-breakpoint
ALTER TABLE "apple_apps" ADD COLUMN "allow_missing_validation_category" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "apple_keys" ADD COLUMN "validation_category" text;--> statement-breakpoint
ALTER TABLE "apple_keys" ADD COLUMN "bundle_version" text;--> statement-breakpoint
ALTER TABLE "apple_keys" ADD COLUMN "receipt" "bytea";--> statement-breakpoint
ALTER TABLE "apple_keys" ADD COLUMN "receipt_problem" text;--> statement-breakpoint
ALTER TABLE "apple_keys" ADD COLUMN "receipt_type" text;--> statement-breakpoint
ALTER TABLE "apple_keys" ADD COLUMN "receipt_created_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "apple_keys" ADD COLUMN "receipt_not_before" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "apple_keys" ADD COLUMN "receipt_expires_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "apple_keys" ADD COLUMN "risk_metric" integer;--> statement-breakpoint
ALTER TABLE "apple_keys" ADD COLUMN "receipt_refreshed_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "apple_keys" ADD COLUMN "receipt_refreshable" boolean DEFAULT true NOT NULL;--> statement-breakpoint
ALTER TABLE "apple_keys" ADD COLUMN "receipt_next_attempt_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "apple_keys" ADD COLUMN "receipt_failures" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "apple_keys" ADD COLUMN "receipt_last_outcome" text;--> statement-breakpoint
CREATE INDEX "apple_keys_receipt_next_attempt_at_idx" ON "apple_keys" USING btree ("receipt_next_attempt_at");