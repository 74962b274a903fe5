-- Every instance LISTENs on attest_changes and reloads its caches when a key, allowlist entry,
-- Play Integrity credential or the development CA changes. pg_notify in a trigger is sent when the
-- changing transaction commits, and never when it rolls back. API key uses (last_used_at) do not notify.
CREATE FUNCTION attest_notify_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('attest_changes', TG_TABLE_NAME);
  RETURN NULL;
END;
$$;
--> statement-breakpoint
CREATE TRIGGER attest_api_keys_changed AFTER UPDATE OF revoked_at, expires_at, hash, mode, result_tokens OR DELETE ON api_keys FOR EACH STATEMENT EXECUTE FUNCTION attest_notify_change();
--> statement-breakpoint
CREATE TRIGGER attest_apple_apps_changed AFTER INSERT OR UPDATE OR DELETE ON apple_apps FOR EACH STATEMENT EXECUTE FUNCTION attest_notify_change();
--> statement-breakpoint
CREATE TRIGGER attest_android_packages_changed AFTER INSERT OR UPDATE OR DELETE ON android_packages FOR EACH STATEMENT EXECUTE FUNCTION attest_notify_change();
--> statement-breakpoint
CREATE TRIGGER attest_android_key_pairs_changed AFTER INSERT OR UPDATE OR DELETE ON android_key_pairs FOR EACH STATEMENT EXECUTE FUNCTION attest_notify_change();
--> statement-breakpoint
CREATE TRIGGER attest_dev_ca_changed AFTER INSERT OR UPDATE OR DELETE ON dev_ca FOR EACH STATEMENT EXECUTE FUNCTION attest_notify_change();
