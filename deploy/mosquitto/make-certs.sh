#!/usr/bin/env bash
# A CA and certificates for a LAN broker: the server's (with the names and addresses clients connect to) and
# one client certificate for the gateway (CN lbs-gateway), all signed by the CA.
#   ./make-certs.sh <out dir> <name or IP>...      e.g. ./make-certs.sh /etc/mosquitto/lbs broker.lan 192.168.1.10
# Keys are written 0600. Copy ca.pem to every client (Home Assistant, Node-RED, the gateway's mqtt.ca_file).
set -euo pipefail
out="${1:?usage: make-certs.sh <out dir> <name or IP>...}"; shift
[ $# -gt 0 ] || set -- "$(hostname)" 127.0.0.1
mkdir -p "$out"; cd "$out"
umask 077
san=""
for name in "$@"; do
  if [[ "$name" =~ ^[0-9.]+$ || "$name" == *:* ]]; then san+="${san:+,}IP:$name"; else san+="${san:+,}DNS:$name"; fi
done
days="${LBS_CERT_DAYS:-825}"
[ -f ca.key ] || openssl req -x509 -newkey rsa:3072 -nodes -days 3650 -subj "/CN=lbs-gateway LAN CA" -keyout ca.key -out ca.pem 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj "/CN=$1" -keyout server.key -out server.csr 2>/dev/null
printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\n' "$san" > server.ext
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days "$days" -extfile server.ext -out server.pem 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj "/CN=lbs-gateway" -keyout client.key -out client.csr 2>/dev/null
printf 'extendedKeyUsage=clientAuth\n' > client.ext
openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days "$days" -extfile client.ext -out client.pem 2>/dev/null
rm -f server.csr client.csr server.ext client.ext
chmod 0644 ca.pem server.pem client.pem
echo "make-certs.sh: ca.pem, server.pem/key ($san), client.pem/key (CN lbs-gateway) in $out"
