CREATE TABLE "dev_ca" (
	"id" integer PRIMARY KEY DEFAULT 1 NOT NULL,
	"root_cert" "bytea" NOT NULL,
	"intermediate_cert" "bytea" NOT NULL,
	"intermediate_key" "bytea" NOT NULL,
	"master_key_id" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "android_key_pairs" ADD COLUMN "test_only" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "android_key_pairs" ADD COLUMN "signing_key" "bytea";--> statement-breakpoint
ALTER TABLE "api_keys" ADD COLUMN "mode" text DEFAULT 'live' NOT NULL;--> statement-breakpoint
ALTER TABLE "apple_keys" ADD COLUMN "mode" text DEFAULT 'live' NOT NULL;--> statement-breakpoint
CREATE UNIQUE INDEX "android_key_pairs_one_test_pair" ON "android_key_pairs" USING btree ("package_name") WHERE test_only;