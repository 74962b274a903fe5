CREATE TABLE "master_key_check" (
	"id" integer PRIMARY KEY DEFAULT 1 NOT NULL,
	"key_id" text NOT NULL,
	"check_value" "bytea" NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "android_key_pairs" ADD COLUMN "master_key_id" text;