ALTER TABLE "api_keys" ADD COLUMN "apps" text[];--> statement-breakpoint
-- a key's scope is announced to every instance like its other settings (change_notify)
DROP TRIGGER attest_api_keys_changed ON api_keys;--> statement-breakpoint
CREATE TRIGGER attest_api_keys_changed AFTER UPDATE OF revoked_at, expires_at, hash, mode, result_tokens, apps OR DELETE ON api_keys FOR EACH STATEMENT EXECUTE FUNCTION attest_notify_change();
