-- The pre-check of an API key (HMAC of the key under a random salt, beside its argon2 hash): a wrong
-- secret is refused before argon2 and spends no failure budget. Keys made before it have none until
-- their next successful verification writes it (not announced on attest_changes, as last_used_at).
ALTER TABLE "api_keys" ADD COLUMN "precheck" text;
