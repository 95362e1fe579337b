#!/usr/bin/env bash
# The Debian package (crates/cli/Cargo.toml [package.metadata.deb],
# packaging/debian/): builds it with cargo-deb and checks it as far as a
# container without systemd as PID 1 allows. Run as root: it installs the
# package into this system for a moment, and purges it again. It leaves the
# system as it found it (the package purged, the user it made deleted).
#
# Checked, in order:
#  1. cargo-deb $CARGO_DEB_VERSION is there (`cargo install --locked` if
#     not); `cargo deb -p xarchive` builds target/debian/xarchive_*.deb
#     (release profile) and xarchive-dbgsym_*.ddeb with the debug symbols.
#  2. `dpkg-deb -c`: the binary (stripped), the unit, the config file and
#     the docs.
#  3. `dpkg-deb -I`: name, version, architecture, maintainer, depends
#     (libc6 and adduser), a description with an extended part; the config
#     file is a conffile; postinst, prerm and postrm are there.
#  4. `systemd-analyze verify xarchive@A.service` against the unpacked
#     package (--root, with this host's own units beside it, which the
#     unit's default dependencies need), so the ExecStart= binary it checks
#     is the packaged one; any warning fails. The unit's exposure
#     (`systemd-analyze security --offline`) is printed, not judged.
#  5. The packaged binary (dpkg -x): `--version` is the crate's; the
#     shipped domain.toml, given as the unit gives it, starts a domain
#     (/healthz and /readyz answer 200) that stops cleanly on SIGTERM (exit
#     0, "stopped cleanly", filter snapshot written); the same file with
#     every setting uncommented is accepted too (it is read and checked
#     before the port is bound: run on a port already taken it must fail
#     on the port, not on the file), and a misspelt key is refused. (Each
#     setting's default is checked against the code by the unit test
#     `the_packaged_config_file_shows_every_setting_with_its_default`.)
#  6. Every system call and socket family the packaged binary used in 5
#     (strace -f) is allowed by the unit's SystemCallFilter= and
#     RestrictAddressFamilies=. Necessary, not sufficient: ZooKeeper, TLS
#     and Redis code paths are not exercised here.
#  7. `dpkg -i`: the maintainer scripts make the system user xarchive (a
#     system uid, no login shell), /var/lib/xarchive (xarchive:xarchive
#     0750) and /etc/xarchive (root:xarchive 0750); `xarchive --version`
#     from PATH; `systemd-analyze verify` of the installed unit; a domain
#     run as the unit runs it (as xarchive, --config
#     /etc/xarchive/domain.toml --name … --data /var/lib/xarchive/…) serves
#     /healthz and stops cleanly on SIGTERM.
#  8. `dpkg --purge`: the files are gone, the empty /var/lib/xarchive too,
#     the user is kept (Debian's way); this script then deletes the user
#     and group if it made them.
#
# Not checked, for want of systemd as PID 1 here: `systemctl enable
# --now xarchive@A` itself — StateDirectory= creating the data directory,
# the hardening directives (ProtectSystem=strict, ReadWritePaths=,
# SystemCallFilter=, …) taking effect, Restart=on-failure, the stop by
# systemd, the daemon-reload and restarts in the maintainer scripts (they
# are skipped when /run/systemd/system is absent). Steps 4, 6 and 7 check
# what can be checked of these without it.
set -euo pipefail
cd "$(dirname "$0")/.."

CARGO_DEB_VERSION=3.8.0

step() { printf '\n== %s\n' "$*"; }
ok() { printf 'ok   %s\n' "$*"; }
fail() {
  printf 'FAIL %s\n' "$*" >&2
  exit 1
}

[ "$(id -u)" -eq 0 ] || fail "run as root: the package is installed into this system and purged"
for tool in dpkg dpkg-deb dpkg-shlibdeps objcopy adduser setpriv curl strace systemd-analyze; do
  command -v "$tool" >/dev/null 2>&1 ||
    fail "$tool is missing (Debian packages: dpkg-dev binutils adduser util-linux curl strace systemd)"
done
if dpkg-query -W -f '${Status}' xarchive 2>/dev/null | grep -q 'ok installed'; then
  fail "the xarchive package is installed on this system already; this test installs and purges it"
fi

work=$(mktemp -d /tmp/xarchive-package.XXXXXX)
server_pid=""
installed=0
user_existed=0
getent passwd xarchive >/dev/null && user_existed=1
cleanup() {
  local rc=$?
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill -KILL "$server_pid" 2>/dev/null || true
  fi
  if [ "$installed" -eq 1 ]; then
    rm -rf /var/lib/xarchive/pkgtest
    dpkg --purge xarchive >/dev/null 2>&1 || true
  fi
  if [ "$user_existed" -eq 0 ] && getent passwd xarchive >/dev/null; then
    deluser --quiet --system xarchive >/dev/null 2>&1 || userdel xarchive || true
    getent group xarchive >/dev/null && { delgroup --quiet --system xarchive >/dev/null 2>&1 || groupdel xarchive || true; }
  fi
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT

version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)

# A domain: starts `$@` (an xarchive serve command listening on
# 127.0.0.1:0) in the background with its log in $1, waits for its address.
start_domain() {
  local log=$1
  shift
  "$@" 2>"$log" &
  server_pid=$!
  local _
  for _ in $(seq 1 300); do
    port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$log" | head -n 1)
    [ -n "$port" ] && return 0
    kill -0 "$server_pid" 2>/dev/null || { cat "$log" >&2; fail "the domain exited before listening"; }
    sleep 0.1
  done
  cat "$log" >&2
  fail "the domain did not listen within 30 s"
}
# Waits until GET $1 answers 200.
await_200() {
  local _
  for _ in $(seq 1 300); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$1")" = 200 ] && return 0
    sleep 0.1
  done
  fail "$1 did not answer 200 within 30 s"
}
# Sends SIGTERM to the domain and expects a clean stop: exit 0 and the log's
# "stopped cleanly", within 30 s.
stop_domain() {
  local log=$1 rc=0 _
  kill -TERM "$server_pid"
  for _ in $(seq 1 300); do
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "$server_pid" 2>/dev/null && fail "the domain did not stop within 30 s of SIGTERM"
  wait "$server_pid" || rc=$?
  server_pid=""
  [ "$rc" -eq 0 ] || { cat "$log" >&2; fail "the domain exited $rc after SIGTERM"; }
  grep -q 'SIGTERM: shutting down' "$log" || fail "the domain did not log the SIGTERM"
  grep -q 'stopped cleanly' "$log" || { cat "$log" >&2; fail "the domain did not stop cleanly"; }
}

step "1. cargo-deb $CARGO_DEB_VERSION and the package"
if [ "$(cargo deb --version 2>/dev/null || true)" != "cargo-deb $CARGO_DEB_VERSION" ]; then
  echo "installing cargo-deb $CARGO_DEB_VERSION"
  cargo install cargo-deb --version "$CARGO_DEB_VERSION" --locked
fi
started=$SECONDS
scripts/package.sh --locked >"$work/cargo-deb.out" 2>"$work/cargo-deb.err" || {
  cat "$work/cargo-deb.err" >&2
  fail "scripts/package.sh (cargo deb -p xarchive)"
}
deb=$(grep '\.deb$' "$work/cargo-deb.out" | tail -n 1)
[ -f "$deb" ] || fail "cargo deb printed no package path: $(cat "$work/cargo-deb.out")"
ok "$(basename "$deb"), $(du -h "$deb" | cut -f1), built in $((SECONDS - started)) s"
dbgsym=$(grep '\.ddeb$' "$work/cargo-deb.out" | tail -n 1)
[ -f "$dbgsym" ] || fail "no -dbgsym package"
dpkg-deb -c "$dbgsym" | grep -q '/usr/lib/debug/\.build-id/.*\.debug$' || fail "no debug symbols in $dbgsym"
ok "$(basename "$dbgsym"), $(du -h "$dbgsym" | cut -f1): the debug symbols"

step "2. dpkg-deb -c"
dpkg-deb -c "$deb" >"$work/contents"
sed 's/^/     /' "$work/contents"
for path in ./usr/bin/xarchive ./usr/lib/systemd/system/xarchive@.service \
  ./etc/xarchive/domain.toml ./usr/share/doc/xarchive/copyright \
  ./usr/share/doc/xarchive/OPERATIONS.md ./usr/share/doc/xarchive/SECURITY.md \
  ./usr/share/man/man1/xarchive.1.gz ./usr/share/man/man1/xarchive-import.1.gz \
  ./usr/share/man/man1/xarchive-request-submit.1.gz ./usr/share/bash-completion/completions/xarchive \
  ./usr/share/zsh/vendor-completions/_xarchive ./usr/share/fish/vendor_completions.d/xarchive.fish; do
  grep -q " $path\$" "$work/contents" || fail "$path is not in the package"
done
grep -Eq '^-rwxr-xr-x (root/root|0/0) .* \./usr/bin/xarchive$' "$work/contents" ||
  fail "/usr/bin/xarchive is not root-owned 0755"
# Stripped: the debug symbols are in the -dbgsym package.
dpkg-deb --fsys-tarfile "$deb" | tar -xO ./usr/bin/xarchive >"$work/xarchive.bin"
if objdump -h "$work/xarchive.bin" | grep -q '\.debug_info'; then fail "/usr/bin/xarchive is not stripped"; fi
# Each file read whole into the work directory first: `grep -q` on a pipe
# may stop reading early, and under pipefail the writer's SIGPIPE fails it.
member() { dpkg-deb --fsys-tarfile "$deb" | tar -xO "$1" >"$work/member"; }
member ./usr/share/man/man1/xarchive.1.gz
gzip -dc "$work/member" >"$work/man" && grep -q '^\.TH xarchive 1' "$work/man" ||
  fail "the manual page is not xarchive(1)"
grep -q '^\.SH "EXIT STATUS"' "$work/man" || fail "xarchive(1) has no EXIT STATUS"
# Every page xarchive(1) names is in the package.
for page in $(grep -o 'xarchive\\-[a-z\\-]*(1)' "$work/man" | sed 's/\\-/-/g; s/(1)//' | sort -u); do
  grep -q " ./usr/share/man/man1/$page.1.gz\$" "$work/contents" || fail "xarchive(1) names $page(1), which is not in the package"
done
member ./usr/share/bash-completion/completions/xarchive
grep -q '_xarchive' "$work/member" || fail "the bash completions are not xarchive's"
member ./usr/lib/systemd/system/xarchive@.service
grep -qx 'Type=notify' "$work/member" || fail "the unit is not Type=notify (ready once the membership is read)"
ok "binary, unit (Type=notify), config file, docs, manual page and completions listed"

step "3. dpkg-deb -I"
dpkg-deb -I "$deb" | sed 's/^/     /'
field() { dpkg-deb -f "$deb" "$1"; }
[ "$(field Package)" = xarchive ] || fail "Package: $(field Package)"
[ "$(field Version)" = "$version-1" ] || fail "Version: $(field Version), not $version-1"
[ "$(field Architecture)" = "$(dpkg --print-architecture)" ] || fail "Architecture: $(field Architecture)"
[ -n "$(field Maintainer)" ] || fail "no Maintainer"
depends=$(field Depends)
echo "$depends" | grep -q 'libc6 (>= ' || fail "Depends lacks a versioned libc6: $depends"
echo "$depends" | grep -qw adduser || fail "Depends lacks adduser: $depends"
field Recommends | grep -q 'fonts-noto-cjk' || fail "Recommends lacks a font with Chinese characters (for certificates): $(field Recommends)"
[ "$(field Description | head -n 1 | wc -c)" -le 80 ] || fail "the Description's synopsis is longer than 80 characters"
[ "$(field Description | wc -l)" -gt 3 ] || fail "the Description has no extended part"
[ "$(dpkg-deb -I "$deb" conffiles)" = /etc/xarchive/domain.toml ] ||
  fail "conffiles: $(dpkg-deb -I "$deb" conffiles)"
for script in postinst prerm postrm; do
  dpkg-deb -I "$deb" "$script" >/dev/null || fail "no $script"
done
ok "xarchive $version-1, Depends: $depends; conffile /etc/xarchive/domain.toml; postinst, prerm, postrm"

step "4. systemd-analyze verify (unpacked package)"
root="$work/root"
dpkg-deb -x "$deb" "$root"
# The unit's default dependencies (sysinit.target, …) are this host's, and
# so is the kill(1) of its ExecReload= (procps, on every Debian system).
cp -rn /usr/lib/systemd/system/. "$root/usr/lib/systemd/system/"
mkdir -p "$root/bin" && cp /bin/kill "$root/bin/kill"
(cd "$work" && systemd-analyze verify --root="$root" xarchive@A.service) >"$work/verify" 2>&1 ||
  { cat "$work/verify" >&2; fail "systemd-analyze verify"; }
[ ! -s "$work/verify" ] || { cat "$work/verify" >&2; fail "systemd-analyze verify warned"; }
ok "xarchive@A.service verifies, with ExecStart=$(sed -n 's/^ExecStart=\([^ ]*\).*/\1/p' "$root/usr/lib/systemd/system/xarchive@.service") from the package"
systemd-analyze security --offline=true --root="$root" xarchive@A.service 2>&1 | tail -n 1 | sed 's/^/     /'

step "5. the packaged binary and its config file"
bin="$root/usr/bin/xarchive"
[ "$("$bin" --version)" = "xarchive $version" ] || fail "--version: $("$bin" --version)"
ok "$("$bin" --version)"
config="$root/etc/xarchive/domain.toml"
strace -f -qq -o "$work/strace" \
  "$bin" serve --config "$config" --name pkgtest --data "$work/data/pkgtest" --listen 127.0.0.1:0 \
  >/dev/null 2>"$work/serve.log" &
strace_pid=$!
server_pid=$strace_pid
for _ in $(seq 1 300); do
  port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$work/serve.log" | head -n 1)
  [ -n "$port" ] && break
  kill -0 "$strace_pid" 2>/dev/null || { cat "$work/serve.log" >&2; fail "the domain exited before listening"; }
  sleep 0.1
done
[ -n "$port" ] || fail "the domain did not listen within 30 s"
# The domain itself is strace's child: signals go to it, not to strace.
server_pid=$(ps -o pid= --ppid "$strace_pid" | tr -d ' ')
[ -n "$server_pid" ] || fail "no domain process under strace"
await_200 "http://127.0.0.1:$port/healthz"
await_200 "http://127.0.0.1:$port/readyz"
ok "the shipped domain.toml (with --name, --data as the unit gives them) serves: /healthz and /readyz 200 on 127.0.0.1:$port"
# Every setting uncommented ("#key = …" lines; prose comments are "# …").
sed 's/^#\([a-z[]\)/\1/' "$config" >"$work/every.toml"
if ! grep -q '^zk = ' "$work/every.toml" || ! grep -q '^\[\[auth.tokens\]\]' "$work/every.toml"; then
  fail "uncommenting the config file did not work"
fi
rc=0
"$bin" serve --config "$work/every.toml" --listen "127.0.0.1:$port" 2>"$work/every.log" || rc=$?
if [ "$rc" -eq 0 ] || ! grep -q "cannot listen on 127.0.0.1:$port" "$work/every.log"; then
  cat "$work/every.log" >&2
  fail "the config file with every setting uncommented was refused"
fi
ok "the same file with all $(grep -c '^#[a-z[]' "$config") settings uncommented is accepted (then fails on the taken port, as meant)"
sed 's/^#expected_items = /expected_itmes = /' "$config" >"$work/typo.toml"
rc=0
"$bin" serve --config "$work/typo.toml" --listen "127.0.0.1:$port" 2>"$work/typo.log" || rc=$?
if [ "$rc" -eq 0 ] || ! grep -q 'invalid configuration' "$work/typo.log"; then
  cat "$work/typo.log" >&2
  fail "a misspelt key was not refused"
fi
ok "a misspelt key is refused: $(grep -o 'unknown field: found .expected_itmes.' "$work/typo.log" | head -n 1)"
kill -TERM "$server_pid"
rc=0
wait "$strace_pid" || rc=$? # strace exits with the domain's status
server_pid=""
[ "$rc" -eq 0 ] || { cat "$work/serve.log" >&2; fail "the domain exited $rc after SIGTERM"; }
if ! grep -q 'SIGTERM: shutting down' "$work/serve.log" || ! grep -q 'stopped cleanly' "$work/serve.log"; then
  cat "$work/serve.log" >&2
  fail "the domain did not stop cleanly on SIGTERM"
fi
if [ ! -s "$work/data/pkgtest/filter.snapshot" ] || [ ! -s "$work/data/pkgtest/records.redb" ]; then
  fail "no filter snapshot or store after the stop"
fi
ok "SIGTERM: exit 0, \"stopped cleanly\", filter.snapshot written"

step "6. system calls and socket families against the unit's filters"
unit="$root/usr/lib/systemd/system/xarchive@.service"
# The system calls a SystemCallFilter= set names, groups expanded.
expand() {
  local name
  for name in "$@"; do
    case "$name" in
      @*)
        local members
        read -r -d '' -a members < <(systemd-analyze syscall-filter "$name" | sed '1d; /^ *#/d; /^ *$/d') || true
        expand "${members[@]}"
        ;;
      *) echo "$name" ;;
    esac
  done
}
: >"$work/allowed"
: >"$work/denied"
while IFS= read -r value; do
  read -r -a names <<<"${value#"~"}"
  case "$value" in
    "~"*) expand "${names[@]}" >>"$work/denied" ;;
    *) expand "${names[@]}" >>"$work/allowed" ;;
  esac
done < <(sed -n 's/^SystemCallFilter=//p' "$unit")
sort -u -o "$work/allowed" "$work/allowed"
sort -u -o "$work/denied" "$work/denied"
comm -23 "$work/allowed" "$work/denied" >"$work/permitted"
sed -n 's/^[0-9]\+ \+\([a-z0-9_]\+\)(.*/\1/p; s/^[0-9]\+ \+<\.\.\. \([a-z0-9_]\+\) resumed>.*/\1/p' "$work/strace" |
  sort -u >"$work/used"
[ "$(wc -l <"$work/used")" -gt 20 ] || fail "strace recorded too few system calls"
outside=$(comm -23 "$work/used" "$work/permitted" | tr '\n' ' ')
[ -z "$outside" ] || fail "system calls outside the unit's SystemCallFilter=: $outside"
ok "$(wc -l <"$work/used") distinct system calls, all in SystemCallFilter= ($(wc -l <"$work/permitted") allowed)"
families=$(sed -n 's/.*socket(\(AF_[A-Z0-9]*\),.*/\1/p' "$work/strace" | sort -u | paste -sd ' ')
allowed_families=" $(sed -n 's/^RestrictAddressFamilies=//p' "$unit") "
for family in $families; do
  case "$allowed_families" in
    *" $family "*) ;;
    *) fail "socket family $family is not in RestrictAddressFamilies=$allowed_families" ;;
  esac
done
ok "socket families used: ${families:-none}; all in RestrictAddressFamilies="
# ProcSubset=pid leaves only /proc/<pid>/… visible.
proc=$(grep -o '"/proc/[^"]*"' "$work/strace" | sort -u | paste -sd ' ')
if grep -o '"/proc/[^"]*"' "$work/strace" | grep -Ev '^"/proc/(self|thread-self|[0-9]+)/' >/dev/null; then
  fail "/proc files outside /proc/<pid> opened (ProcSubset=pid hides them): $proc"
fi
ok "/proc files opened: ${proc:-none}; all under /proc/<pid> (ProcSubset=pid)"

step "7. dpkg -i into this system"
installed=1
dpkg -i "$deb" >"$work/dpkg-i.log" 2>&1 || { cat "$work/dpkg-i.log" >&2; fail "dpkg -i"; }
sed 's/^/     /' "$work/dpkg-i.log"
[ "$(command -v xarchive)" = /usr/bin/xarchive ] || fail "xarchive is not /usr/bin/xarchive on PATH"
[ "$(xarchive --version)" = "xarchive $version" ] || fail "xarchive --version: $(xarchive --version)"
ok "$(xarchive --version) at /usr/bin/xarchive"
IFS=: read -r _ _ uid gid _ home shell < <(getent passwd xarchive) || fail "no user xarchive"
[ "$uid" -lt 1000 ] || fail "xarchive is not a system user (uid $uid)"
[ "$(getent group xarchive | cut -d: -f3)" = "$gid" ] || fail "xarchive's group is not xarchive"
case "$shell" in */nologin | */false) ;; *) fail "xarchive has a login shell: $shell" ;; esac
ok "system user xarchive: uid $uid, group xarchive ($gid), home $home, shell $shell"
[ "$(stat -c '%U:%G %a' /var/lib/xarchive)" = "xarchive:xarchive 750" ] ||
  fail "/var/lib/xarchive is $(stat -c '%U:%G %a' /var/lib/xarchive)"
[ "$(stat -c '%U:%G %a' /etc/xarchive)" = "root:xarchive 750" ] ||
  fail "/etc/xarchive is $(stat -c '%U:%G %a' /etc/xarchive)"
ok "/var/lib/xarchive xarchive:xarchive 0750, /etc/xarchive root:xarchive 0750"
dpkg-query -W -f '${Conffiles}\n' xarchive | grep -q '^ /etc/xarchive/domain.toml ' ||
  fail "/etc/xarchive/domain.toml is not registered as a conffile"
ok "/etc/xarchive/domain.toml registered as a conffile"
(cd "$work" && systemd-analyze verify xarchive@A.service) >"$work/verify-installed" 2>&1 ||
  { cat "$work/verify-installed" >&2; fail "systemd-analyze verify (installed)"; }
[ ! -s "$work/verify-installed" ] || { cat "$work/verify-installed" >&2; fail "systemd-analyze verify (installed) warned"; }
ok "systemd-analyze verify xarchive@A.service (installed unit and binary)"
# As the unit runs it: user xarchive, no new privileges, the installed
# config, --name and --data from the instance name (here "pkgtest").
start_domain "$work/installed.log" setpriv --reuid=xarchive --regid=xarchive --init-groups --no-new-privs \
  /usr/bin/xarchive serve --config /etc/xarchive/domain.toml --name pkgtest --data /var/lib/xarchive/pkgtest \
  --listen 127.0.0.1:0
await_200 "http://127.0.0.1:$port/healthz"
ok "as user xarchive with /etc/xarchive/domain.toml: /healthz 200 on 127.0.0.1:$port"
stop_domain "$work/installed.log"
[ "$(stat -c %U /var/lib/xarchive/pkgtest/records.redb)" = xarchive ] || fail "the store is not owned by xarchive"
ok "SIGTERM: exit 0, stopped cleanly; /var/lib/xarchive/pkgtest/records.redb owned by xarchive"
rm -rf /var/lib/xarchive/pkgtest

step "8. dpkg --purge"
dpkg --purge xarchive >"$work/dpkg-purge.log" 2>&1 || { cat "$work/dpkg-purge.log" >&2; fail "dpkg --purge"; }
installed=0
sed 's/^/     /' "$work/dpkg-purge.log"
for path in /usr/bin/xarchive /usr/lib/systemd/system/xarchive@.service /etc/xarchive /var/lib/xarchive; do
  [ ! -e "$path" ] || fail "$path is left after the purge"
done
getent passwd xarchive >/dev/null || fail "the purge deleted the user xarchive (it is meant to be kept)"
ok "files, /etc/xarchive and the empty /var/lib/xarchive gone; user xarchive kept"
if [ "$user_existed" -eq 0 ]; then
  echo "     deleting the user xarchive, which this test made"
fi

echo
echo "package checks passed: $deb"
