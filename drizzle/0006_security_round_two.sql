CREATE TABLE "api_key_origins" (
	"api_key_id" text NOT NULL,
	"prefix" text NOT NULL,
	"last_seen_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "api_key_origins_api_key_id_prefix_pk" PRIMARY KEY("api_key_id","prefix")
);
--> statement-breakpoint
ALTER TABLE "android_packages" ADD COLUMN "service_account_fingerprint" text;--> statement-breakpoint
ALTER TABLE "api_key_origins" ADD CONSTRAINT "api_key_origins_api_key_id_api_keys_id_fk" FOREIGN KEY ("api_key_id") REFERENCES "public"."api_keys"("id") ON DELETE cascade ON UPDATE no action;