CREATE TABLE "android_keys" (
	"key_id" "bytea" PRIMARY KEY NOT NULL,
	"public_key" "bytea" NOT NULL,
	"package_name" text NOT NULL,
	"attestation_security_level" text NOT NULL,
	"keymint_security_level" text NOT NULL,
	"verified_boot_state" text NOT NULL,
	"device_locked" boolean NOT NULL,
	"verified_boot_key" "bytea" NOT NULL,
	"os_patch_level" integer,
	"attestation_version" integer NOT NULL,
	"signature_digests" text[] DEFAULT '{}'::text[] NOT NULL,
	"mode" text DEFAULT 'live' NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "android_revocations" (
	"id" text PRIMARY KEY NOT NULL,
	"entries" jsonb NOT NULL,
	"entry_count" integer NOT NULL,
	"source" text NOT NULL,
	"taken_at" timestamp with time zone NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "android_packages" ADD COLUMN "key_attestation" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "android_packages" ADD COLUMN "min_security_level" text DEFAULT 'TrustedEnvironment' NOT NULL;--> statement-breakpoint
ALTER TABLE "android_packages" ADD COLUMN "allow_unlocked" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "android_packages" ADD COLUMN "boot_keys" text[] DEFAULT '{}'::text[] NOT NULL;--> statement-breakpoint
ALTER TABLE "android_packages" ADD COLUMN "max_patch_age_months" integer;--> statement-breakpoint
-- every instance re-reads the attestation status list when it changes (0008's attest_changes)
CREATE TRIGGER attest_android_revocations_changed AFTER INSERT OR UPDATE OR DELETE ON android_revocations FOR EACH STATEMENT EXECUTE FUNCTION attest_notify_change();
