CREATE TABLE "device_velocity" (
	"service" text NOT NULL,
	"key_id" "bytea" NOT NULL,
	"period_seconds" integer NOT NULL,
	"window_start" timestamp with time zone NOT NULL,
	"count" bigint NOT NULL,
	"last_at" timestamp with time zone NOT NULL,
	CONSTRAINT "device_velocity_service_key_id_pk" PRIMARY KEY("service","key_id")
);
--> statement-breakpoint
ALTER TABLE "android_packages" ADD COLUMN "max_verifies_per_device" integer;--> statement-breakpoint
ALTER TABLE "android_packages" ADD COLUMN "device_window_seconds" integer;--> statement-breakpoint
ALTER TABLE "apple_apps" ADD COLUMN "max_verifies_per_device" integer;--> statement-breakpoint
ALTER TABLE "apple_apps" ADD COLUMN "device_window_seconds" integer;