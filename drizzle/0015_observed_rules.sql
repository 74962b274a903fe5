ALTER TABLE "android_packages" ADD COLUMN "observe" text[] DEFAULT '{}'::text[] NOT NULL;--> statement-breakpoint
ALTER TABLE "apple_apps" ADD COLUMN "observe" text[] DEFAULT '{}'::text[] NOT NULL;