#!/usr/bin/env bash
# Process-level test of the release tarball: `npm pack`, `npm install -g` of the tarball into a
# private prefix, then the installed `attest` from another folder (--version, a usage error,
# `serve` with its migrations, SIGTERM). Too slow for the vitest suite (npm itself takes a minute
# on a busy machine): .ci/run calls it. Needs dist/ (npm test and npm run build make it); uses the npm cache first.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD

fail() { echo "globalInstall: FAIL: $*" >&2; exit 1; }
[ -f dist/cli/main.js ] || fail "dist/ is missing: run npm run build first"

work=$(mktemp -d "${TMPDIR:-/tmp}/attest-install-XXXXXX")
# left private (0700, as mktemp makes it): a prefix no other user can enter must work too, also
# as root, whose embedded PostgreSQL runs as attest-db from binaries root copies where it can reach them
server=''
cleanup() {
  if [ -n "$server" ] && kill -0 "$server" 2>/dev/null; then kill -KILL "$server" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

version=$(node -p 'require("./package.json").version')
name=$(node -p 'require("./package.json").name')

# no install-time build: npm warns about (and asks approval for) a tarball's own prepare script
node -e 'const s=require("./package.json").scripts||{}; for (const k of ["prepare","install","postinstall","preinstall"]) if (s[k]) { console.error(k); process.exit(1) }' \
  || fail "package.json has an install-time script; build in prepack instead"

# dist/ is already built: skip `prepack` (a second tsc run)
npm pack --ignore-scripts --silent --pack-destination "$work" >/dev/null
tgz="$work/$name-$version.tgz"
[ -f "$tgz" ] || fail "npm pack did not write $tgz"
listing=$(tar -tzf "$tgz")
for f in package/bin/attest.js package/dist/cli/main.js package/dist/db/migrate.js package/drizzle/meta/_journal.json; do
  grep -qx "$f" <<<"$listing" || fail "the tarball lacks $f"
done
if grep -qE '^package/(src|test|node_modules)/' <<<"$listing"; then fail "the tarball ships src/, test/ or node_modules/"; fi

# a consumer install: no devDependencies, no project around it, native modules from their prebuilds
npm install -g --prefix "$work/prefix" --prefer-offline --no-audit --no-fund --loglevel=error "$tgz" >"$work/npm.log" 2>&1 \
  || { cat "$work/npm.log" >&2; fail "npm install -g of the tarball failed"; }
# no script of this package, nor of a dependency it adds beyond the native ones, asks for approval
if grep -q 'prepare\|@scarf' "$work/npm.log"; then cat "$work/npm.log" >&2; fail "npm install -g warned about install scripts"; fi
bin="$work/prefix/bin/attest"
[ -x "$bin" ] || fail "npm install -g did not link bin/attest"

mkdir -p "$work/elsewhere"
cd "$work/elsewhere"
export PATH="$work/prefix/bin:$PATH"
unset DATABASE_URL

# the package's own version, whatever npm project (if any) it runs in
out=$(npm_package_version=9.9.9 attest --version)
[ "$out" = "$version" ] || fail "attest --version printed '$out', expected $version"

set +e
attest --no-such-flag >"$work/out" 2>"$work/err"
code=$?
set -e
[ "$code" = 2 ] || fail "a usage error exited $code, expected 2"
[ "$(wc -l <"$work/err")" = 1 ] || fail "a usage error printed more than one line: $(cat "$work/err")"
[ ! -s "$work/out" ] || fail "a usage error wrote to stdout"

# serve from the installed copy: it finds its migrations and applies them
export ATTEST_DATA_DIR="$work/data" LOG_LEVEL=warn
mkfifo "$work/serve.err"
attest serve --port 0 --host 127.0.0.1 2>"$work/serve.err" >/dev/null &
server=$!
exec 3<"$work/serve.err"
url=''
# bounded by the server's own line (or its exit: EOF); the read timeout only catches a hang
while IFS= read -r -t 300 -u 3 line; do
  echo "$line" >>"$work/serve.log"
  if [[ $line =~ listening\ on\ (http://[^[:space:]]+) ]]; then url=${BASH_REMATCH[1]}; break; fi
done
[ -n "$url" ] || fail "serve did not start: $(cat "$work/serve.log" 2>/dev/null)"
# keep draining stderr so the server never blocks on a full pipe
cat <&3 >>"$work/serve.log" &
exec 3<&-

ready=$(node -e 'fetch(process.argv[1] + "/readyz").then((r) => console.log(r.status), (e) => console.log(e.message))' "$url")
[ "$ready" = 200 ] || fail "/readyz answered $ready (migrations not found or not applied?)"
# the API reference page from the installed copy itself (swagger-ui's files ship in dist/)
docs=$(node -e 'Promise.all(["/docs", "/docs/swagger-ui-bundle.js", "/docs/swagger-ui.css"].map((p) => fetch(process.argv[1] + p).then((r) => r.status))).then((s) => console.log(s.join(" ")), (e) => console.log(e.message))' "$url")
[ "$docs" = "200 200 200" ] || fail "/docs and its assets answered $docs"
applied=$(attest db status --json | node -e 'const s=JSON.parse(require("fs").readFileSync(0,"utf8"));console.log(s.length>0&&s.every((m)=>m.applied))')
[ "$applied" = true ] || fail "db status does not list every migration applied"

created=$(attest keys create --name backup-check --json | node -p 'JSON.parse(require("fs").readFileSync(0,"utf8")).id')
# docs/operations.md: a consistent snapshot while the server runs (through its admin socket)
attest db backup "$work/backup.tgz" >/dev/null || fail "attest db backup failed while serve ran"

kill -TERM "$server"
set +e
wait "$server"
code=$?
set -e
server=''
[ "$code" = 0 ] || fail "serve exited $code on SIGTERM, expected 0"
[ ! -e "$work/data/attest.lock" ] || fail "serve left its lock file behind"

# docs/operations.md: the snapshot restores into a new data dir; the master key travels apart
ATTEST_DATA_DIR="$work/restored/data" attest db restore "$work/backup.tgz" >/dev/null || fail "attest db restore failed"
cp "$work/data/master.key" "$work/restored/data/master.key"
listed=$(ATTEST_DATA_DIR="$work/restored/data" attest keys list --json)
grep -q "\"$created\"" <<<"$listed" || fail "the key made before the backup is not in the restored database"

echo "globalInstall: ok ($name@$version installed from the tarball; --version, usage error, serve with migrations, /docs, SIGTERM, backup and restore)"
