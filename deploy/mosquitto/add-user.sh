#!/usr/bin/env bash
# Adds (or replaces) users in a mosquitto password file, the password read from stdin, never from the command
# line (mosquitto_passwd -b would show it to every `ps`). The hash is mosquitto 2's: PBKDF2-SHA512, 101 rounds.
#   printf '%s' "$SECRET" | ./add-user.sh /etc/mosquitto/lbs/passwd homeassistant
# Several users get the same password (an active/standby pair's per-connection users, see acl):
#   printf '%s' "$SECRET" | ./add-user.sh passwd lbs-gateway lbs-gateway-observer-a lbs-gateway-lease-a lbs-gateway-observer-b lbs-gateway-lease-b
set -euo pipefail
file="${1:?usage: add-user.sh <password file> <user>...}"; shift
[ $# -gt 0 ] || { echo "usage: add-user.sh <password file> <user>..." >&2; exit 2; }
for user in "$@"; do
  [[ "$user" != *:* && -n "$user" ]] || { echo "add-user.sh: a user name cannot be empty or hold ':'" >&2; exit 2; }
done
touch "$file"; chmod 0600 "$file"
# The program comes as an argument, so stdin stays the password's.
script=$(cat <<'PY'
import base64, hashlib, os, sys
path, users = sys.argv[1], sys.argv[2:]
password = sys.stdin.buffer.read()
if not password:
    sys.exit("add-user.sh: empty password on stdin")
new = []
for user in users:
    salt = os.urandom(12)
    digest = hashlib.pbkdf2_hmac("sha512", password, salt, 101)
    new.append(f"{user}:$7$101${base64.b64encode(salt).decode()}${base64.b64encode(digest).decode()}\n")
with open(path) as f:
    lines = [l for l in f if l.split(":", 1)[0] not in users]
with open(path, "w") as f:
    f.writelines(lines + new)
PY
)
python3 -c "$script" "$file" "$@"
echo "add-user.sh: $* in $file"
