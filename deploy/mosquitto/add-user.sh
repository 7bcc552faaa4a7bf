#!/usr/bin/env bash
# Adds (or replaces) a user in a mosquitto password file, the password read from stdin, never from the command
# line (mosquitto_passwd -b would show it to every `ps`). The hash is mosquitto 2's: PBKDF2-SHA512, 101 rounds.
#   printf '%s' "$SECRET" | ./add-user.sh /etc/mosquitto/lbs/passwd homeassistant
set -euo pipefail
file="${1:?usage: add-user.sh <password file> <user>}"; user="${2:?usage: add-user.sh <password file> <user>}"
[[ "$user" != *:* ]] || { echo "add-user.sh: a user name cannot hold ':'" >&2; exit 2; }
touch "$file"; chmod 0600 "$file"
# The program comes as an argument, so stdin stays the password's.
script=$(cat <<'PY'
import base64, hashlib, os, sys
path, user = sys.argv[1], sys.argv[2]
password = sys.stdin.buffer.read()
if not password:
    sys.exit("add-user.sh: empty password on stdin")
salt = os.urandom(12)
digest = hashlib.pbkdf2_hmac("sha512", password, salt, 101)
line = f"{user}:$7$101${base64.b64encode(salt).decode()}${base64.b64encode(digest).decode()}\n"
with open(path) as f:
    lines = [l for l in f if not l.startswith(user + ":")]
with open(path, "w") as f:
    f.writelines(lines + [line])
PY
)
python3 -c "$script" "$file" "$user"
echo "add-user.sh: $user in $file"
