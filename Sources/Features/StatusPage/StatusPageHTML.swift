/// The status page: one self-contained document (no CDN, no external files: the box may have no internet).
/// It reads `/api/status` and `/api/energy` once, then follows `/api/live` (server-sent events), re-reading the
/// whole status every 30 s and after a reconnect. The energy plot is drawn as SVG by the page itself.
package enum StatusPageHTML {
    package static let page = #"""
<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>lbs-gateway</title>
<style>
:root { --bg:#fff; --fg:#1b1f24; --muted:#667; --line:#dde1e6; --card:#f6f8fa; --ok:#1a7f37; --warn:#9a6700; --bad:#cf222e; }
@media (prefers-color-scheme: dark) { :root { --bg:#0d1117; --fg:#e6edf3; --muted:#8b949e; --line:#30363d; --card:#161b22; } }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; background:var(--bg); color:var(--fg); }
header { display:flex; gap:16px; align-items:baseline; padding:12px 20px; border-bottom:1px solid var(--line); flex-wrap:wrap; }
header h1 { font-size:18px; margin:0; }
.muted { color:var(--muted); }
main { padding:12px 20px; display:grid; gap:16px; grid-template-columns: minmax(0,2fr) minmax(0,1fr); }
section { background:var(--card); border:1px solid var(--line); border-radius:8px; padding:10px 12px; min-width:0; }
section h2 { font-size:15px; margin:0 0 8px; }
.wide { grid-column: 1 / -1; }
table { border-collapse:collapse; width:100%; }
th, td { text-align:left; padding:4px 6px; border-bottom:1px solid var(--line); vertical-align:top; }
th { font-weight:600; color:var(--muted); font-size:12px; }
.scroll { max-height:520px; overflow:auto; }
.pill { display:inline-block; padding:0 7px; border-radius:10px; font-size:12px; border:1px solid currentColor; }
.ok, .online { color:var(--ok); } .degraded, .stale { color:var(--warn); } .down, .offline, .error { color:var(--bad); }
.values span { display:inline-block; margin-right:10px; white-space:nowrap; }
.values b { font-weight:600; }
button { font:inherit; padding:2px 10px; border-radius:6px; border:1px solid var(--line); background:var(--bg); color:var(--fg); cursor:pointer; }
button:disabled { opacity:.45; cursor:not-allowed; }
input[type=search] { font:inherit; padding:3px 8px; border:1px solid var(--line); border-radius:6px; background:var(--bg); color:var(--fg); width:260px; }
#events li { margin:0 0 6px; list-style:none; }
#events { padding:0; margin:0; }
#events code { font-size:12px; word-break:break-all; }
svg text { fill:var(--muted); font-size:11px; }
.legend span { margin-right:14px; white-space:nowrap; }
.legend i { display:inline-block; width:12px; height:3px; vertical-align:middle; margin-right:4px; }
@media (max-width: 900px) { main { grid-template-columns: 1fr; } }
</style>
</head>
<body>
<header>
  <h1>lbs-gateway</h1>
  <span id="gateway" class="muted"></span>
  <span>live: <span id="live" class="pill offline">connecting</span></span>
  <span id="mode" class="muted"></span>
</header>
<main>
  <section class="wide">
    <h2>Home energy, last 24 hours <span id="energy-now" class="muted"></span></h2>
    <div class="legend" id="legend"></div>
    <svg id="energy" viewBox="0 0 960 240" width="100%" height="240" role="img" aria-label="home energy over 24 hours"></svg>
    <div id="energy-note" class="muted"></div>
  </section>
  <section>
    <h2>Devices <span id="device-count" class="muted"></span> <input type="search" id="filter" placeholder="filter by name, id, type, room"></h2>
    <div class="scroll">
    <table id="devices"><thead><tr><th>Device</th><th>Type</th><th>Availability</th><th>Last seen</th><th>State</th><th></th></tr></thead><tbody></tbody></table>
    </div>
  </section>
  <section>
    <h2>Vendors</h2>
    <table id="vendors"><thead><tr><th>Vendor</th><th>Health</th><th>Breaker</th><th>Details</th></tr></thead><tbody></tbody></table>
    <h2 style="margin-top:14px">Outbox <span id="outbox-count" class="muted"></span></h2>
    <table id="outbox"><thead><tr><th>Device</th><th>Changes</th><th>Issued</th><th>State</th></tr></thead><tbody></tbody></table>
    <h2 style="margin-top:14px">Last events</h2>
    <ul id="events"></ul>
  </section>
</main>
<script>
"use strict";
const token = new URLSearchParams(location.search).get("access_token");
const api = (path) => token ? path + (path.includes("?") ? "&" : "?") + "access_token=" + encodeURIComponent(token) : path;
const devices = new Map();
const vendors = new Map();
let events = [];
let allowCommands = false;
let energyHistory = { series: {} };
const livePoints = { solar_power: [], grid_power: [], battery_power: [], home_power: [] };
const colors = { solar_power: "#e3a008", grid_power: "#6e7781", battery_power: "#1a7f37", home_power: "#0969da" };
const labels = { solar_power: "Solar", grid_power: "Grid (+ import)", battery_power: "Battery (+ discharge)", home_power: "Home" };
const $ = (selector) => document.querySelector(selector);

function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (name === "class") node.className = value; else if (name.startsWith("on")) node.addEventListener(name.slice(2), value); else node.setAttribute(name, value);
  }
  for (const child of children) if (child !== null && child !== undefined) node.append(child instanceof Node ? child : String(child));
  return node;
}
function ago(iso) {
  if (!iso) return "never";
  const seconds = Math.max(0, Math.round((Date.now() - Date.parse(iso)) / 1000));
  if (seconds < 60) return seconds + " s ago";
  if (seconds < 3600) return Math.round(seconds / 60) + " min ago";
  if (seconds < 86400) return Math.round(seconds / 3600) + " h ago";
  return Math.round(seconds / 86400) + " d ago";
}
function show(value) {
  if (value === null || value === undefined) return "–";
  if (typeof value === "object") return JSON.stringify(value);
  if (typeof value === "number") return Number.isInteger(value) ? String(value) : value.toFixed(2);
  return String(value);
}

// Devices
function deviceRow(device) {
  const values = el("td", { class: "values" });
  for (const key of Object.keys(device.values).sort()) {
    const unit = device.units[key] ? " " + device.units[key] : "";
    values.append(el("span", { "data-key": key }, key + " ", el("b", {}, show(device.values[key]) + unit)));
  }
  const control = el("td");
  if (device.control) {
    const current = device.values[device.control];
    let label, payload;
    if (device.control === "lock") {
      const locked = current === "LOCKED";
      label = locked ? "Unlock" : "Lock"; payload = { lock: locked ? "UNLOCK" : "LOCK" };
    } else {
      const on = current === "ON";
      label = on ? "Turn off" : "Turn on"; payload = { state: on ? "OFF" : "ON" };
    }
    const button = el("button", { class: "switch", "data-device": device.id, onclick: () => send(device, payload) }, label);
    if (!allowCommands || !device.online) { button.disabled = true; button.title = allowCommands ? "the device is offline" : "read-only: set http.allow_commands: true"; }
    control.append(button);
  }
  const availability = device.online ? "online" : "offline";
  return el("tr", { "data-id": device.id, "data-online": String(device.online) },
    el("td", {}, el("div", {}, device.name), el("div", { class: "muted" }, device.id + (device.room ? " · " + device.room : ""))),
    el("td", {}, device.type, el("div", { class: "muted" }, device.vendor)),
    el("td", {}, el("span", { class: "pill " + availability }, availability), device.stale ? el("div", { class: "stale" }, "stale (cached)") : null),
    el("td", { class: "last-seen", "data-time": device.last_seen || "" }, ago(device.last_seen)),
    values, control);
}
function matches(device) {
  const filter = $("#filter").value.trim().toLowerCase();
  if (!filter) return true;
  return [device.id, device.name, device.type, device.room || "", device.vendor].some((text) => text.toLowerCase().includes(filter));
}
function renderDevices() {
  const body = el("tbody");
  for (const device of [...devices.values()].sort((a, b) => a.id.localeCompare(b.id))) if (matches(device)) body.append(deviceRow(device));
  $("#devices tbody").replaceWith(body);
  const online = [...devices.values()].filter((d) => d.online).length;
  $("#device-count").textContent = `${devices.size} (${online} online)`;
}
function updateDevice(device) {
  devices.set(device.id, device);
  const existing = document.querySelector(`#devices tr[data-id="${CSS.escape(device.id)}"]`);
  if (existing) { if (matches(device)) existing.replaceWith(deviceRow(device)); else existing.remove(); }
  else renderDevices();
}
async function send(device, payload) {
  if (payload.lock === "UNLOCK" && !confirm(`Unlock ${device.name}?`)) return;
  const headers = { "Content-Type": "application/json" };
  if (token) headers.Authorization = "Bearer " + token;
  const response = await fetch(api(`/api/devices/${encodeURIComponent(device.id)}/set`), { method: "POST", headers, body: JSON.stringify(payload) });
  if (!response.ok) {
    const body = await response.json().catch(() => ({}));
    addEvent({ type: "page_error", time: new Date().toISOString(), data: body.error || { message: response.statusText } });
  }
}

// Vendors, outbox, events
function renderVendors() {
  const body = el("tbody");
  for (const vendor of [...vendors.values()].sort((a, b) => a.id.localeCompare(b.id))) {
    const details = [];
    if (vendor.last_error) details.push(el("div", { class: "error" }, vendor.last_error.code + ": " + vendor.last_error.message));
    if (vendor.next_attempt) details.push(el("div", { class: "muted" }, "next attempt " + new Date(vendor.next_attempt).toLocaleTimeString()));
    if (vendor.last_success) details.push(el("div", { class: "muted" }, "last success " + ago(vendor.last_success)));
    for (const [window, use] of Object.entries(vendor.quota || {})) details.push(el("div", { class: "muted" }, `quota ${window}: ${use.used}/${use.limit}`));
    body.append(el("tr", { "data-vendor": vendor.id },
      el("td", {}, vendor.id, el("div", { class: "muted" }, vendor.type || "")),
      el("td", {}, el("span", { class: "pill " + vendor.state }, vendor.state)),
      el("td", {}, vendor.breaker || "–"), el("td", {}, ...details)));
  }
  $("#vendors tbody").replaceWith(body);
}
function renderOutbox(outbox) {
  const body = el("tbody");
  for (const command of outbox.commands) {
    body.append(el("tr", {}, el("td", {}, command.device), el("td", {}, JSON.stringify(command.changes)),
      el("td", {}, ago(command.issued_at)), el("td", {}, command.state)));
  }
  if (!outbox.commands.length) body.append(el("tr", {}, el("td", { colspan: "4", class: "muted" }, "empty")));
  $("#outbox tbody").replaceWith(body);
  $("#outbox-count").textContent = String(outbox.commands_waiting);
}
function addEvent(event) {
  events.push(event);
  if (events.length > 100) events = events.slice(-100);
  renderEvents();
}
function renderEvents() {
  const list = el("ul", { id: "events" });
  for (const event of [...events].reverse()) {
    const level = event.type === "command_failed" || event.type === "page_error" || event.type === "alert_raised" ? "error" : "";
    list.append(el("li", { "data-type": event.type }, el("span", { class: level }, event.type), " ",
      el("span", { class: "muted" }, new Date(event.time).toLocaleTimeString()), el("div", {}, el("code", {}, JSON.stringify(event.data)))));
  }
  $("#events").replaceWith(list);
}

// Energy plot
function energyNow(energy) {
  if (!energy) { $("#energy-now").textContent = ""; return; }
  const parts = Object.keys(labels).filter((key) => typeof energy[key] === "number").map((key) => `${labels[key].split(" ")[0]} ${Math.round(energy[key])} W`);
  $("#energy-now").textContent = parts.length ? "· now " + parts.join(", ") : "";
  const time = Date.now() / 1000;
  for (const key of Object.keys(livePoints)) {
    if (typeof energy[key] !== "number") continue;
    livePoints[key].push([time, energy[key]]);
    while (livePoints[key].length && livePoints[key][0][0] < time - 86400) livePoints[key].shift();
  }
}
function drawEnergy() {
  const svg = $("#energy");
  const width = 960, height = 240, left = 52, right = 8, top = 8, bottom = 22;
  const end = Date.now() / 1000, start = end - 86400;
  const series = {};
  for (const key of Object.keys(labels)) {
    const history = (energyHistory.series[key] || []).filter((p) => p[0] >= start);
    const lastHistory = history.length ? history[history.length - 1][0] + (energyHistory.step_s || 300) : start;
    const live = livePoints[key].filter((p) => p[0] >= lastHistory);
    if (history.length || live.length) series[key] = history.concat(live);
  }
  let low = 0, high = 0;
  for (const points of Object.values(series)) for (const [, value] of points) { low = Math.min(low, value); high = Math.max(high, value); }
  if (high === low) high = low + 1;
  const x = (t) => left + (t - start) / 86400 * (width - left - right);
  const y = (v) => top + (high - v) / (high - low) * (height - top - bottom);
  const parts = [];
  for (let i = 0; i <= 4; i++) {
    const value = low + (high - low) * i / 4;
    parts.push(`<line x1="${left}" x2="${width - right}" y1="${y(value)}" y2="${y(value)}" stroke="currentColor" stroke-opacity="0.12"/>`);
    parts.push(`<text x="${left - 6}" y="${y(value) + 4}" text-anchor="end">${Math.round(value)} W</text>`);
  }
  parts.push(`<line x1="${left}" x2="${width - right}" y1="${y(0)}" y2="${y(0)}" stroke="currentColor" stroke-opacity="0.4"/>`);
  for (let hours = 24; hours >= 0; hours -= 6) {
    const t = end - hours * 3600;
    const label = new Date(t * 1000).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
    parts.push(`<text x="${x(t)}" y="${height - 6}" text-anchor="middle">${label}</text>`);
  }
  for (const [key, points] of Object.entries(series)) {
    const path = points.map(([t, v]) => `${x(t).toFixed(1)},${y(v).toFixed(1)}`).join(" ");
    parts.push(`<polyline data-key="${key}" fill="none" stroke="${colors[key]}" stroke-width="2" points="${path}"/>`);
  }
  svg.innerHTML = parts.join("");
  $("#legend").replaceChildren(...Object.keys(series).map((key) => el("span", {}, el("i", { style: `background:${colors[key]}` }), labels[key])));
  $("#energy-note").textContent = energyHistory.available === false ? energyHistory.reason + " (the plot shows what arrived since the page opened)"
    : Object.keys(series).length ? "" : "no energy devices";
}

// Loading and the live feed
async function loadStatus() {
  const response = await fetch(api("/api/status"));
  if (!response.ok) throw new Error("status " + response.status);
  const status = await response.json();
  allowCommands = status.allow_commands;
  $("#gateway").textContent = `${status.gateway.base_topic} · version ${status.gateway.version} · up since ${new Date(status.gateway.started_at).toLocaleString()}`;
  $("#mode").textContent = allowCommands ? "commands allowed" : "read-only";
  devices.clear();
  for (const device of status.devices) devices.set(device.id, device);
  vendors.clear();
  for (const vendor of status.vendors) vendors.set(vendor.id, vendor);
  events = status.events;
  renderDevices(); renderVendors(); renderOutbox(status.outbox); renderEvents(); energyNow(status.energy);
}
async function loadEnergy() {
  const response = await fetch(api("/api/energy"));
  if (response.ok) energyHistory = await response.json();
  drawEnergy();
}
function follow() {
  const source = new EventSource(api("/api/live"));
  let opened = false;
  source.onopen = () => {
    $("#live").textContent = "live"; $("#live").className = "pill online";
    // After a reconnect, what was missed is read again.
    if (opened) loadStatus().catch(() => {});
    opened = true;
  };
  source.onerror = () => { $("#live").textContent = "reconnecting"; $("#live").className = "pill offline"; };
  source.addEventListener("devices", (message) => { for (const device of JSON.parse(message.data)) updateDevice(device); });
  source.addEventListener("device_removed", (message) => { devices.delete(JSON.parse(message.data).id); renderDevices(); });
  source.addEventListener("vendor", (message) => { const vendor = JSON.parse(message.data); vendors.set(vendor.id, vendor); renderVendors(); });
  source.addEventListener("outbox", (message) => renderOutbox(JSON.parse(message.data)));
  source.addEventListener("event", (message) => addEvent(JSON.parse(message.data)));
  source.addEventListener("energy", (message) => energyNow(JSON.parse(message.data)));
}
$("#filter").addEventListener("input", renderDevices);
follow();
loadStatus().then(loadEnergy).catch((error) => { $("#live").textContent = "error: " + error.message; $("#live").className = "pill offline"; });
setInterval(() => loadStatus().catch(() => {}), 30000);
setInterval(drawEnergy, 5000);
setInterval(() => { for (const cell of document.querySelectorAll("td.last-seen")) cell.textContent = ago(cell.dataset.time || null); }, 5000);
</script>
</body>
</html>
"""#
}
