// The developer portal: sign in with a key (exchanged for a session cookie), then keys, webhook endpoints,
// credits and usage, and recent runs. Every change sends the session's CSRF token (common.js).
"use strict";

(() => {
  const { call, el, when, notify } = Canvas;
  const api = (method, path, body) => call("portal/api/", method, path, body);
  const $ = (id) => document.getElementById(id);
  let runsCursor = null;

  function show(signedIn) {
    $("sign-in").hidden = signedIn;
    $("signed-in").hidden = !signedIn;
    $("who").hidden = !signedIn;
  }

  async function guarded(action) {
    try {
      await action();
    } catch (error) {
      if (error.status === 401) {
        Canvas.setCsrf(null);
        show(false);
        notify("Your session has ended: sign in again.", "error");
        return;
      }
      notify(error.message, "error");
    }
  }

  function copyButton(buttonId, valueId) {
    $(buttonId).addEventListener("click", async () => {
      const text = $(valueId).textContent;
      try {
        await navigator.clipboard.writeText(text);
        notify("Copied to the clipboard.", "info");
      } catch (_) {
        const range = document.createRange();
        range.selectNodeContents($(valueId));
        const selection = window.getSelection();
        selection.removeAllRanges();
        selection.addRange(range);
        notify("Selected: press Ctrl+C (⌘C) to copy.", "info");
      }
    });
  }

  // ---- session

  // Where to go once signed in: the `next` parameter, when it is a page of this deployment's portal or viewer
  // (same origin, under the folder the portal page is in, after resolving `..`), else nowhere: no open redirect.
  function nextPage() {
    const raw = new URLSearchParams(window.location.search).get("next");
    // Backslashes and control characters are refused outright: browsers read `\` as `/` and drop tabs.
    if (!raw || /[\\\u0000-\u001f\u007f]/.test(raw)) return null;
    const root = new URL(".", window.location.href);
    let target;
    try {
      target = new URL(raw, root);
    } catch (_) {
      return null;
    }
    if (target.origin !== window.location.origin || !target.pathname.startsWith(root.pathname)) return null;
    // A viewer's page; the portal's own is this one, where signing in stays anyway.
    const page = target.pathname.slice(root.pathname.length);
    return /^runs\/[^/]+$/.test(page) ? target.pathname + target.search + target.hash : null;
  }

  async function start() {
    const next = nextPage();
    try {
      const session = await api("GET", "session");
      if (next) {
        window.location.assign(next);
        return;
      }
      await signedIn(session);
    } catch (error) {
      show(false);
      if (error.status !== 401) notify(error.message, "error");
      else if (next) notify("Sign in to see that page: you will be taken back to it.", "info");
    }
  }

  async function signedIn(session) {
    Canvas.setCsrf(session.csrf_token);
    $("account-id").textContent = session.account_id;
    show(true);
    await Promise.all([loadAccount(), loadKeys(), loadEndpoints(), loadRuns(true)]);
  }

  $("sign-in-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const input = $("api-key");
    const key = input.value.trim();
    input.value = "";
    try {
      const session = await api("POST", "session", { api_key: key });
      const next = nextPage();
      if (next) {
        window.location.assign(next);
        return;
      }
      notify("", "info");
      await signedIn(session);
    } catch (error) {
      notify(error.message, "error");
    }
  });

  $("sign-out").addEventListener("click", () => guarded(async () => {
    await api("DELETE", "session");
    Canvas.setCsrf(null);
    $("new-key").hidden = true;
    $("new-secret").hidden = true;
    show(false);
    notify("Signed out.", "info");
  }));

  // ---- credits and usage

  async function loadAccount() {
    const account = await api("GET", "account");
    $("credits-balance").textContent = account.credits_balance.toLocaleString();
    $("credits-used").textContent = account.credits_used_this_month.toLocaleString();
    $("usage-month").textContent = account.month;
    $("runs-month").textContent = account.runs_this_month.toLocaleString();
    $("active-runs").textContent = account.active_runs.toLocaleString();
    const limits = account.limits;
    $("limits").textContent =
      `Limits: ${limits.max_concurrent_runs} runs at once, ${limits.max_blocks_per_run} blocks per run, ` +
      `${limits.max_files_per_run} files per run, ${limits.max_webhook_endpoints} webhook endpoints. ` +
      "1,000 credits = 1 currency unit.";
  }

  // ---- keys

  async function loadKeys() {
    const { keys } = await api("GET", "keys");
    const rows = keys.map((key) => {
      const revoke = key.status === "active"
        ? el("button", { type: "button", class: "danger small", "data-key-id": key.id, onclick: () => revokeKey(key) }, "Revoke")
        : null;
      return el("tr", { "data-key-id": key.id, class: key.status },
        el("td", {}, el("code", { text: `${key.prefix}…${key.last_four || "????"}` })),
        el("td", { text: when(key.created) }),
        el("td", { text: when(key.last_used) }),
        el("td", {}, el("span", { class: `badge ${key.status}`, text: key.status })),
        el("td", { class: "actions" }, revoke));
    });
    $("keys-body").replaceChildren(...rows);
  }

  $("create-key").addEventListener("click", () => guarded(async () => {
    const created = await api("POST", "keys");
    $("new-key-value").textContent = created.key;
    $("new-key").hidden = false;
    await loadKeys();
  }));

  async function revokeKey(key) {
    if (!window.confirm(`Revoke ${key.prefix}…${key.last_four || ""}? Requests with it will be refused at once.`)) return;
    await guarded(async () => {
      await api("DELETE", `keys/${encodeURIComponent(key.id)}`);
      notify("Key revoked.", "info");
      await loadKeys();
    });
  }

  copyButton("copy-key", "new-key-value");
  copyButton("copy-secret", "new-secret-value");

  // ---- webhook endpoints

  async function loadEndpoints() {
    try {
      const { endpoints } = await api("GET", "webhook_endpoints");
      const rows = endpoints.map((endpoint) => el("tr", { "data-endpoint-id": endpoint.id },
        el("td", {}, el("code", { text: endpoint.url })),
        el("td", { text: (endpoint.events || []).join(", ") || "all" }),
        el("td", {}, el("span", { class: `badge ${endpoint.status}`, title: endpoint.disabled_reason, text: endpoint.status })),
        el("td", { text: when(endpoint.created) }),
        el("td", { class: "actions" },
          el("button", { type: "button", class: "secondary small", onclick: () => ping(endpoint) }, "Ping"),
          el("button", { type: "button", class: "secondary small", onclick: () => showDeliveries(endpoint) }, "Deliveries"),
          el("button", { type: "button", class: "secondary small", onclick: () => rotate(endpoint) }, "Rotate secret"),
          el("button", { type: "button", class: "danger small", onclick: () => removeEndpoint(endpoint) }, "Remove"))));
      if (!rows.length) rows.push(el("tr", {}, el("td", { colspan: 5, class: "muted", text: "No endpoints yet." })));
      $("endpoints-body").replaceChildren(...rows);
    } catch (error) {
      if (error.status === 401) throw error;
      $("endpoints-body").replaceChildren(el("tr", {}, el("td", { colspan: 5, class: "muted", text: error.message })));
    }
  }

  function showSecret(endpoint) {
    $("new-secret-url").textContent = endpoint.url;
    $("new-secret-value").textContent = endpoint.secret;
    $("new-secret").hidden = false;
  }

  $("endpoint-form").addEventListener("submit", (event) => {
    event.preventDefault();
    guarded(async () => {
      const events = $("endpoint-events").value.split(",").map((e) => e.trim()).filter(Boolean);
      const created = await api("POST", "webhook_endpoints", { url: $("endpoint-url").value.trim(), events: events.length ? events : null });
      $("endpoint-url").value = "";
      $("endpoint-events").value = "";
      showSecret(created);
      await loadEndpoints();
    });
  });

  function ping(endpoint) {
    return guarded(async () => {
      const { event_id: eventId } = await api("POST", `webhook_endpoints/${encodeURIComponent(endpoint.id)}/ping`);
      notify(`Ping sent: ${eventId}`, "info");
      await showDeliveries(endpoint);
    });
  }

  function rotate(endpoint) {
    if (!window.confirm(`Rotate the signing secret of ${endpoint.url}? The old one stops being used.`)) return undefined;
    return guarded(async () => {
      showSecret(await api("POST", `webhook_endpoints/${encodeURIComponent(endpoint.id)}/rotate_secret`));
    });
  }

  function removeEndpoint(endpoint) {
    if (!window.confirm(`Remove ${endpoint.url}? It will receive no more events.`)) return undefined;
    return guarded(async () => {
      await api("DELETE", `webhook_endpoints/${encodeURIComponent(endpoint.id)}`);
      $("deliveries").hidden = true;
      await loadEndpoints();
    });
  }

  function showDeliveries(endpoint) {
    return guarded(async () => {
      const { deliveries } = await api("GET", `webhook_endpoints/${encodeURIComponent(endpoint.id)}/deliveries`);
      $("deliveries-url").textContent = endpoint.url;
      const rows = deliveries.map((d) => el("tr", {},
        el("td", {}, el("code", { text: d.event_id })),
        el("td", { text: d.type }),
        el("td", { text: d.attempt }),
        el("td", { text: d.status_code ?? (d.error || "–") }),
        el("td", { text: d.duration_ms == null ? "–" : `${d.duration_ms} ms` }),
        el("td", { text: when(d.attempted) }),
        el("td", { text: d.next_retry ? when(d.next_retry) : "–" })));
      if (!rows.length) rows.push(el("tr", {}, el("td", { colspan: 7, class: "muted", text: "No deliveries yet." })));
      $("deliveries-body").replaceChildren(...rows);
      $("deliveries").hidden = false;
    });
  }

  // ---- runs

  async function loadRuns(fresh) {
    const query = new URLSearchParams({ limit: "10" });
    if (!fresh && runsCursor) query.set("cursor", runsCursor);
    const page = await api("GET", `runs?${query}`);
    runsCursor = page.next_cursor;
    const rows = page.runs.map((run) => el("tr", { "data-run-id": run.run_id },
      el("td", {}, el("a", { href: `runs/${encodeURIComponent(run.run_id)}`, text: when(run.created_at) })),
      el("td", {}, el("span", { class: `badge ${run.status}`, text: run.status })),
      el("td", { text: run.template_used }),
      el("td", { class: "prompt", text: run.prompt })));
    if (fresh) {
      if (!rows.length) rows.push(el("tr", {}, el("td", { colspan: 4, class: "muted", text: "No runs yet." })));
      $("runs-body").replaceChildren(...rows);
    } else {
      $("runs-body").append(...rows);
    }
    $("more-runs").hidden = !runsCursor;
  }

  $("refresh-runs").addEventListener("click", () => guarded(() => Promise.all([loadRuns(true), loadAccount()])));
  $("more-runs").addEventListener("click", () => guarded(() => loadRuns(false)));

  start();
})();
