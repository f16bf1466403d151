// Shared by the portal and the viewer: JSON calls with the session's CSRF token, and safe DOM building
// (text only: nothing the service returns is ever parsed as HTML).
"use strict";

const Canvas = (() => {
  let csrfToken = null;

  class ApiError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  async function call(base, method, path, body) {
    const headers = { Accept: "application/json" };
    if (method !== "GET") {
      if (csrfToken) headers["X-CSRF-Token"] = csrfToken;
      if (body !== undefined) headers["Content-Type"] = "application/json";
    }
    const response = await fetch(base + path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: "same-origin",
      cache: "no-store",
    });
    let payload = null;
    try {
      payload = await response.json();
    } catch (_) {
      payload = null;
    }
    if (!response.ok || !payload || payload.success !== true) {
      const message = payload && payload.error ? payload.error : `Request failed (${response.status})`;
      throw new ApiError(response.status, message);
    }
    return payload.data;
  }

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (name === "text") node.textContent = String(value);
      else if (name === "onclick") node.addEventListener("click", value);
      else node.setAttribute(name, value === true ? "" : String(value));
    }
    for (const child of children) {
      if (child === null || child === undefined) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  // An ISO 8601 string, or Unix seconds (the webhook endpoints' times).
  function when(value) {
    if (value === null || value === undefined || value === "") return "never";
    const date = new Date(typeof value === "number" ? value * 1000 : value);
    return Number.isNaN(date.getTime()) ? String(value) : date.toLocaleString();
  }

  function notify(message, kind) {
    const box = document.getElementById("notice");
    if (!box) return;
    box.textContent = message;
    box.className = kind || "info";
    box.hidden = !message;
  }

  return {
    ApiError,
    call,
    el,
    when,
    notify,
    setCsrf(token) { csrfToken = token; },
  };
})();
