CREATE TABLE "audit_chain" (
	"id" boolean PRIMARY KEY DEFAULT true NOT NULL CHECK ("id"),
	"seq" bigint NOT NULL,
	"head" text NOT NULL
);
--> statement-breakpoint
ALTER TABLE "audit_events" ADD COLUMN "seq" bigint;--> statement-breakpoint
ALTER TABLE "audit_events" ADD COLUMN "prev_hash" text;--> statement-breakpoint
ALTER TABLE "audit_events" ADD COLUMN "hash" text;--> statement-breakpoint
-- RFC 8785 (JSON Canonicalization Scheme) of a jsonb value: members sorted by name, no white
-- space, strings escaped as ECMAScript's JSON.stringify does, numbers as ECMAScript prints them.
-- One difference, which attest's own member names never meet: names with characters above
-- U+FFFF sort by code point here, by UTF-16 code unit in RFC 8785.
CREATE FUNCTION "attest_jcs"(v jsonb) RETURNS text LANGUAGE plpgsql IMMUTABLE STRICT
	-- float8's text is then the shortest that reads back, as ECMAScript's digits are
	SET extra_float_digits = 1 AS $$
DECLARE
	n numeric;
	out text;
	m text[];
	digits text;
	k int;
	p int;
BEGIN
	CASE jsonb_typeof(v)
	WHEN 'object' THEN
		SELECT '{' || coalesce(string_agg(to_jsonb(e.key)::text || ':' || attest_jcs(e.value), ',' ORDER BY e.key COLLATE "C"), '') || '}'
			INTO out FROM jsonb_each(v) e;
		RETURN out;
	WHEN 'array' THEN
		SELECT '[' || coalesce(string_agg(attest_jcs(a.value), ',' ORDER BY a.ord), '') || ']'
			INTO out FROM jsonb_array_elements(v) WITH ORDINALITY a(value, ord);
		RETURN out;
	WHEN 'number' THEN
		n := v::text::numeric;
		IF n = trunc(n) AND abs(n) < 1e21 THEN
			RETURN trunc(n)::text;
		END IF;
		-- ECMAScript's Number::toString from the shortest digits: value = 0.DIGITS x 10^p
		m := regexp_match(abs(n)::float8::text, '^([0-9]+)(?:\.([0-9]+))?(?:e([+-][0-9]+))?$');
		digits := m[1] || coalesce(m[2], '');
		p := length(m[1]) + coalesce(m[3]::int, 0) - (length(digits) - length(ltrim(digits, '0')));
		digits := rtrim(ltrim(digits, '0'), '0');
		k := length(digits);
		out := CASE
			WHEN k <= p AND p <= 21 THEN digits || repeat('0', p - k)
			WHEN 0 < p AND p <= 21 THEN substr(digits, 1, p) || '.' || substr(digits, p + 1)
			WHEN -6 < p AND p <= 0 THEN '0.' || repeat('0', -p) || digits
			ELSE substr(digits, 1, 1) || CASE WHEN k > 1 THEN '.' || substr(digits, 2) ELSE '' END
				|| 'e' || CASE WHEN p - 1 >= 0 THEN '+' ELSE '-' END || abs(p - 1)::text
		END;
		RETURN CASE WHEN n < 0 THEN '-' || out ELSE out END;
	ELSE
		-- strings, true, false, null: jsonb prints them as JSON.stringify does
		RETURN v::text;
	END CASE;
END
$$;--> statement-breakpoint
-- The SHA-256 (hex) of one event's canonical form: what `attest audit verify` recomputes.
CREATE FUNCTION "attest_audit_hash"(seq bigint, at timestamptz, actor text, action text, target text, before jsonb, after jsonb, prev_hash text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
	SELECT encode(sha256(convert_to(attest_jcs(jsonb_build_object(
		'seq', seq,
		'at', to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
		'actor', actor, 'action', action, 'target', target,
		'before', before, 'after', after, 'prevHash', prev_hash)), 'UTF8')), 'hex')
$$;--> statement-breakpoint
-- The events recorded before the chain, chained in the order they were recorded, from the
-- stated starting point: the first event's prevHash is 64 zeros.
ALTER TABLE "audit_events" DISABLE TRIGGER "audit_events_no_update_delete";--> statement-breakpoint
DO $$
DECLARE
	r record;
	s bigint := 0;
	h text := repeat('0', 64);
BEGIN
	FOR r IN SELECT * FROM audit_events ORDER BY id LOOP
		s := s + 1;
		UPDATE audit_events SET seq = s, prev_hash = h,
			hash = attest_audit_hash(s, r.at, r.actor, r.action, r.target, r.before, r.after, h)
			WHERE id = r.id RETURNING hash INTO h;
	END LOOP;
	INSERT INTO audit_chain (id, seq, head) VALUES (true, s, h);
END
$$;--> statement-breakpoint
ALTER TABLE "audit_events" ENABLE TRIGGER "audit_events_no_update_delete";--> statement-breakpoint
ALTER TABLE "audit_events" ALTER COLUMN "seq" SET NOT NULL;--> statement-breakpoint
ALTER TABLE "audit_events" ALTER COLUMN "prev_hash" SET NOT NULL;--> statement-breakpoint
ALTER TABLE "audit_events" ALTER COLUMN "hash" SET NOT NULL;--> statement-breakpoint
CREATE UNIQUE INDEX "audit_events_seq_idx" ON "audit_events" USING btree ("seq");--> statement-breakpoint
-- Every new event is chained here, whatever statement inserts it: the head row's lock orders
-- concurrent inserts (a rolled-back insert gives its place back), and whatever the inserting
-- statement says for seq, prev_hash or hash is overwritten.
CREATE FUNCTION "audit_events_chain"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	UPDATE audit_chain SET seq = audit_chain.seq + 1 WHERE id RETURNING audit_chain.seq, audit_chain.head INTO NEW.seq, NEW.prev_hash;
	NEW.hash := attest_audit_hash(NEW.seq, NEW.at, NEW.actor, NEW.action, NEW.target, NEW.before, NEW.after, NEW.prev_hash);
	UPDATE audit_chain SET head = NEW.hash WHERE id;
	RETURN NEW;
END
$$;--> statement-breakpoint
CREATE TRIGGER "audit_events_chain" BEFORE INSERT ON "audit_events" FOR EACH ROW EXECUTE FUNCTION "audit_events_chain"();--> statement-breakpoint
CREATE TRIGGER "audit_chain_no_delete" BEFORE DELETE OR TRUNCATE ON "audit_chain" FOR EACH STATEMENT EXECUTE FUNCTION "audit_events_append_only"();
