ALTER TABLE "android_packages" ADD COLUMN "require_licensed" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "android_packages" ADD COLUMN "play_protect_verdicts" text[] DEFAULT '{}'::text[] NOT NULL;--> statement-breakpoint
ALTER TABLE "android_packages" ADD COLUMN "deny_app_access_risk" text[] DEFAULT '{}'::text[] NOT NULL;--> statement-breakpoint
ALTER TABLE "android_packages" ADD COLUMN "max_device_activity" text;--> statement-breakpoint
ALTER TABLE "android_packages" ADD COLUMN "service_account" "bytea";--> statement-breakpoint
ALTER TABLE "android_packages" ADD COLUMN "service_account_key_id" text;