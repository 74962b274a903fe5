CREATE TABLE "android_key_pairs" (
	"package_name" text NOT NULL,
	"id" text NOT NULL,
	"decryption_key" "bytea" NOT NULL,
	"verification_key" "bytea" NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "android_key_pairs_package_name_id_pk" PRIMARY KEY("package_name","id")
);
--> statement-breakpoint
CREATE TABLE "android_packages" (
	"package_name" text PRIMARY KEY NOT NULL,
	"certificate_digests" text[] DEFAULT '{}'::text[] NOT NULL,
	"min_verdict" text DEFAULT 'MEETS_DEVICE_INTEGRITY' NOT NULL,
	"allow_unrecognized" boolean DEFAULT false NOT NULL,
	"max_age_seconds" integer DEFAULT 600 NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "api_keys" (
	"id" text PRIMARY KEY NOT NULL,
	"name" text NOT NULL,
	"hash" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"last_used_at" timestamp with time zone,
	"expires_at" timestamp with time zone,
	"revoked_at" timestamp with time zone
);
--> statement-breakpoint
CREATE TABLE "apple_apps" (
	"app_id" text PRIMARY KEY NOT NULL,
	"env" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "apple_keys" (
	"key_id" "bytea" PRIMARY KEY NOT NULL,
	"public_key" "bytea" NOT NULL,
	"app_id" text NOT NULL,
	"environment" text NOT NULL,
	"counter" bigint NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"last_used_at" timestamp with time zone
);
--> statement-breakpoint
CREATE TABLE "attestation_sessions" (
	"reference" text PRIMARY KEY NOT NULL,
	"api_key_id" text NOT NULL,
	"server_nonce" "bytea" NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"expires_at" timestamp with time zone NOT NULL,
	"consumed_at" timestamp with time zone
);
--> statement-breakpoint
ALTER TABLE "android_key_pairs" ADD CONSTRAINT "android_key_pairs_package_name_android_packages_package_name_fk" FOREIGN KEY ("package_name") REFERENCES "public"."android_packages"("package_name") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "attestation_sessions" ADD CONSTRAINT "attestation_sessions_api_key_id_api_keys_id_fk" FOREIGN KEY ("api_key_id") REFERENCES "public"."api_keys"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "attestation_sessions_expires_at_idx" ON "attestation_sessions" USING btree ("expires_at");