#!/usr/bin/env bash
# Removes what install.sh installed: the binary and its debug file, the unit and its credentials drop-in. The
# cache (/var/lib/lbs-gateway) and the config with its secrets are kept unless asked: --purge-cache removes the
# cache, --purge-config the config and secrets.
#   sudo ./deploy/uninstall.sh [--purge-cache] [--purge-config] [--root DIR]
set -euo pipefail
root=""; purge_cache=false; purge_config=false
while [ $# -gt 0 ]; do
  case "$1" in
    --root) root="${2:?--root needs a folder}"; shift 2 ;;
    --purge-cache) purge_cache=true; shift ;;
    --purge-config) purge_config=true; shift ;;
    *) echo "uninstall.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
if [ -z "$root" ] && command -v systemctl >/dev/null 2>&1; then
  systemctl disable --now lbs-gateway 2>/dev/null || true
fi
rm -f "$root/usr/local/bin/lbs-gateway" "$root/etc/systemd/system/lbs-gateway.service" \
  "$root/etc/systemd/system/lbs-gateway.service.d/credentials.conf" "$root/usr/local/lib/debug/usr/local/bin/lbs-gateway.debug"
# The drop-in folder and the debug tree go when nothing else is in them (an operator's `systemctl edit` stays).
rmdir "$root/etc/systemd/system/lbs-gateway.service.d" 2>/dev/null || true
for d in usr/local/bin usr/local usr ""; do rmdir "$root/usr/local/lib/debug/$d" 2>/dev/null || break; done
[ -d "$root/etc/systemd/system/lbs-gateway.service.d" ] && \
  echo "uninstall.sh: kept $root/etc/systemd/system/lbs-gateway.service.d (your own drop-ins are in it)"
[ -z "$root" ] && command -v systemctl >/dev/null 2>&1 && systemctl daemon-reload || true
if $purge_cache; then
  # DynamicUser keeps the state under /var/lib/private with a link at /var/lib/lbs-gateway.
  rm -rf "$root/var/lib/lbs-gateway" "$root/var/lib/private/lbs-gateway"
  echo "uninstall.sh: removed the cache"
else
  echo "uninstall.sh: kept the cache in $root/var/lib/lbs-gateway (--purge-cache removes it)"
fi
if $purge_config; then
  rm -rf "$root/etc/lbs-gateway"
  echo "uninstall.sh: removed the config and credentials"
else
  echo "uninstall.sh: kept $root/etc/lbs-gateway (--purge-config removes it)"
fi
