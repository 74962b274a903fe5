CREATE TABLE "android_issuer_blocks" (
	"serial" text PRIMARY KEY NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "android_issuer_velocity" (
	"package_name" text NOT NULL,
	"issuer" "bytea" NOT NULL,
	"mode" text DEFAULT 'live' NOT NULL,
	"period_seconds" integer NOT NULL,
	"window_start" timestamp with time zone NOT NULL,
	"count" bigint NOT NULL,
	"serial" text NOT NULL,
	"subject" text NOT NULL,
	"last_at" timestamp with time zone NOT NULL,
	CONSTRAINT "android_issuer_velocity_pkey" PRIMARY KEY("package_name","issuer","mode")
);
--> statement-breakpoint
ALTER TABLE "android_packages" ADD COLUMN "max_keys_per_issuer" text;