CREATE TABLE "android_key_assertions" (
	"digest" "bytea" NOT NULL,
	"mode" text NOT NULL,
	"accepted_at" timestamp with time zone NOT NULL,
	CONSTRAINT "android_key_assertions_pkey" PRIMARY KEY("digest","mode")
);
--> statement-breakpoint
CREATE INDEX "android_key_assertions_accepted_at_idx" ON "android_key_assertions" USING btree ("accepted_at");--> statement-breakpoint
ALTER TABLE "apple_keys" DROP CONSTRAINT "apple_keys_pkey";--> statement-breakpoint
ALTER TABLE "apple_keys" ADD CONSTRAINT "apple_keys_pkey" PRIMARY KEY("key_id","mode");--> statement-breakpoint
ALTER TABLE "android_keys" DROP CONSTRAINT "android_keys_pkey";--> statement-breakpoint
ALTER TABLE "android_keys" ADD CONSTRAINT "android_keys_pkey" PRIMARY KEY("key_id","mode");--> statement-breakpoint
ALTER TABLE "device_velocity" ADD COLUMN "mode" text DEFAULT 'live' NOT NULL;--> statement-breakpoint
ALTER TABLE "device_velocity" DROP CONSTRAINT "device_velocity_service_key_id_pk";--> statement-breakpoint
ALTER TABLE "device_velocity" ADD CONSTRAINT "device_velocity_pkey" PRIMARY KEY("service","key_id","mode");
