ALTER TABLE "android_packages" ADD COLUMN "min_account_activity" text;--> statement-breakpoint
ALTER TABLE "android_packages" ADD COLUMN "deny_location_spoofing" text[] DEFAULT '{}'::text[] NOT NULL;--> statement-breakpoint
ALTER TABLE "api_keys" ADD COLUMN "rejection_details" boolean DEFAULT false NOT NULL;--> statement-breakpoint
-- a key's rejection details are announced to every instance like its other settings (change_notify)
DROP TRIGGER attest_api_keys_changed ON api_keys;--> statement-breakpoint
CREATE TRIGGER attest_api_keys_changed AFTER UPDATE OF revoked_at, expires_at, hash, mode, result_tokens, apps, rejection_details OR DELETE ON api_keys FOR EACH STATEMENT EXECUTE FUNCTION attest_notify_change();
