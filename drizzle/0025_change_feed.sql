CREATE TABLE "attest_change_version" (
	"id" boolean PRIMARY KEY DEFAULT true NOT NULL,
	"version" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "attest_changes" (
	"version" bigint PRIMARY KEY NOT NULL,
	"table_name" text NOT NULL,
	"at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
-- The change feed without LISTEN: every announcement of the change_notify triggers is also a row of
-- attest_changes, numbered in commit order. The version row is locked until the changing
-- transaction ends, so a transaction that takes version n commits before the one that takes n + 1
-- can: a poller that read up to n never meets a smaller version later. Changes are admin actions
-- and refreshes (a few a minute at most), so that serialisation costs nothing. The latest 1000
-- rows are kept: an instance that polls every second needs only the last few.
INSERT INTO "attest_change_version" ("id", "version") VALUES (true, 0);--> statement-breakpoint
ALTER TABLE "attest_change_version" ADD CONSTRAINT "attest_change_version_one_row" CHECK ("id");--> statement-breakpoint
CREATE OR REPLACE FUNCTION attest_notify_change() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  v bigint;
BEGIN
  UPDATE attest_change_version SET version = version + 1 WHERE id RETURNING version INTO v;
  INSERT INTO attest_changes (version, table_name) VALUES (v, TG_TABLE_NAME);
  DELETE FROM attest_changes WHERE version <= v - 1000;
  PERFORM pg_notify('attest_changes', TG_TABLE_NAME);
  RETURN NULL;
END;
$$;
