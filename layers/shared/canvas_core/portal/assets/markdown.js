// Markdown to DOM nodes for the viewer's answer: headings, paragraphs, lists (nested by indentation), block
// quotes, fenced and indented code, rules, simple pipe tables; inline bold, italic, strikethrough, code and links.
// Every piece of the text becomes a text node: raw HTML stays visible as text and never becomes elements, and a
// link is a link only when its scheme is http, https or mailto (anything else stays its text).
"use strict";

const CanvasMarkdown = (() => {
  const SAFE_SCHEMES = new Set(["http:", "https:", "mailto:"]);
  const ESCAPABLE = "\\`*_{}[]()#+-.!|~<>\"'";
  let headingShift = 0;

  function node(tag, attrs, children) {
    const element = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) element.setAttribute(name, value);
    for (const child of children || []) element.append(child);
    return element;
  }

  // The link's target when its scheme is one a reader can follow safely, else null.
  function safeHref(raw) {
    const href = raw.trim().replace(/^<(.*)>$/, "$1");
    if (!href || /[\u0000-\u001f\\]/.test(href)) return null;
    let url;
    try {
      url = new URL(href);
    } catch (_) {
      return null; // relative or malformed: nothing the answer should point at on this site
    }
    return SAFE_SCHEMES.has(url.protocol) ? url.href : null;
  }

  function link(text, href) {
    const target = safeHref(href);
    if (!target) return [text];
    return [node("a", { href: target, rel: "noopener noreferrer nofollow", target: "_blank" }, [text])];
  }

  // The index of the `]` closing the `[` at `open`, nested brackets and escapes allowed, or -1.
  function closingBracket(text, open) {
    let depth = 0;
    for (let i = open; i < text.length; i += 1) {
      if (text[i] === "\\") i += 1;
      else if (text[i] === "[") depth += 1;
      else if (text[i] === "]" && (depth -= 1) === 0) return i;
    }
    return -1;
  }

  // `(url "title")` right after a link's text: [url, end index] or null.
  function linkTarget(text, start) {
    if (text[start] !== "(") return null;
    let depth = 0;
    for (let i = start; i < text.length; i += 1) {
      if (text[i] === "\\") i += 1;
      else if (text[i] === "(") depth += 1;
      else if (text[i] === ")" && (depth -= 1) === 0) {
        const inside = text.slice(start + 1, i).trim();
        const url = inside.replace(/\s+("[^"]*"|'[^']*')$/, "");
        return [url, i + 1];
      }
    }
    return null;
  }

  function isWordChar(ch) {
    return ch !== undefined && /[\p{L}\p{N}]/u.test(ch);
  }

  // Where the emphasis run `marker` opened at `start` closes, or -1: not right after a space, and for `_` not
  // inside a word (snake_case stays text).
  function closingMarker(text, marker, start) {
    for (let i = start; i < text.length; i += 1) {
      if (text[i] === "\\") {
        i += 1;
        continue;
      }
      if (text[i] === "`") {
        const end = text.indexOf("`", i + 1);
        if (end > 0) i = end;
        continue;
      }
      if (!text.startsWith(marker, i) || /\s/.test(text[i - 1])) continue;
      if (marker.length === 1 && text[i + 1] === marker) {
        i += 1; // the half of a `**` run is not a closing `*`
        continue;
      }
      if (marker[0] === "_" && isWordChar(text[i + marker.length])) continue;
      return i;
    }
    return -1;
  }

  const EMPHASIS = [
    ["**", "strong"], ["__", "strong"], ["~~", "del"], ["*", "em"], ["_", "em"],
  ];

  function inline(text) {
    const out = [];
    let plain = "";
    const flush = () => {
      if (plain) out.push(plain);
      plain = "";
    };
    let i = 0;
    while (i < text.length) {
      const ch = text[i];
      if (ch === "\\" && i + 1 < text.length && ESCAPABLE.includes(text[i + 1])) {
        plain += text[i + 1];
        i += 2;
        continue;
      }
      if (ch === "\\" && text[i + 1] === "\n") {
        flush();
        out.push(node("br"));
        i += 2;
        continue;
      }
      if (ch === "`") {
        const run = text.slice(i).match(/^`+/)[0];
        const end = text.indexOf(run, i + run.length);
        if (end > 0) {
          flush();
          const code = text.slice(i + run.length, end).replace(/\n/g, " ");
          out.push(node("code", {}, [code.length > 2 && code.startsWith(" ") && code.endsWith(" ") ? code.slice(1, -1) : code]));
          i = end + run.length;
          continue;
        }
        plain += run;
        i += run.length;
        continue;
      }
      if (ch === "[" || (ch === "!" && text[i + 1] === "[")) {
        const open = ch === "!" ? i + 1 : i;
        const close = closingBracket(text, open);
        const target = close > 0 ? linkTarget(text, close + 1) : null;
        if (target) {
          flush();
          const label = text.slice(open + 1, close);
          // An image is shown as a link to it: the page loads nothing from the answer's addresses.
          out.push(...link(ch === "!" ? (label || target[0]) : node("span", {}, inline(label)), target[0]));
          i = target[1];
          continue;
        }
      }
      if (ch === "<") {
        const auto = text.slice(i).match(/^<((?:https?|mailto):[^\s<>]+)>/i);
        if (auto) {
          flush();
          out.push(...link(auto[1], auto[1]));
          i += auto[0].length;
          continue;
        }
      }
      if (ch === "h") {
        const bare = /^https?:\/\/[^\s<>()]+[^\s<>().,;:!?'"*_~]/.exec(text.slice(i));
        if (bare && !isWordChar(text[i - 1])) {
          flush();
          out.push(...link(bare[0], bare[0]));
          i += bare[0].length;
          continue;
        }
      }
      const emphasis = EMPHASIS.find(([marker]) => text.startsWith(marker, i));
      if (emphasis) {
        const [marker, tag] = emphasis;
        const opensWord = !/\s/.test(text[i + marker.length] || " ") && !(marker[0] === "_" && isWordChar(text[i - 1]));
        const end = opensWord ? closingMarker(text, marker, i + marker.length + 1) : -1;
        if (end > 0) {
          flush();
          out.push(node(tag, {}, inline(text.slice(i + marker.length, end))));
          i = end + marker.length;
          continue;
        }
        plain += marker;
        i += marker.length;
        continue;
      }
      if (ch === "\n") {
        // Two spaces before a line's end are a line break; a plain newline joins the lines.
        if (plain.endsWith("  ")) {
          plain = plain.trimEnd();
          flush();
          out.push(node("br"));
        } else {
          plain = `${plain.trimEnd()} `;
        }
        i += 1;
        continue;
      }
      plain += ch;
      i += 1;
    }
    flush();
    return out;
  }

  // ---- blocks

  const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([\w+-]*)/;
  const HEADING = /^ {0,3}(#{1,6})(?:\s+(.*?))?\s*#*\s*$/;
  const RULE = /^ {0,3}([-*_])(?:\s*\1){2,}\s*$/;
  const QUOTE = /^ {0,3}> ?/;
  const ITEM = /^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$/;
  const TABLE_RULE = /^\s*\|?\s*:?-{1,}:?\s*(\|\s*:?-{1,}:?\s*)*\|?\s*$/;

  function indentOf(line) {
    return line.replace(/\t/g, "    ").match(/^ */)[0].length;
  }

  function cells(line) {
    const trimmed = line.trim().replace(/^\|/, "").replace(/(?<!\\)\|$/, "");
    const out = [];
    let cell = "";
    let inCode = false;
    for (let i = 0; i < trimmed.length; i += 1) {
      const ch = trimmed[i];
      if (ch === "\\" && trimmed[i + 1] === "|") {
        cell += "|";
        i += 1;
      } else if (ch === "`") {
        inCode = !inCode;
        cell += ch;
      } else if (ch === "|" && !inCode) {
        out.push(cell.trim());
        cell = "";
      } else {
        cell += ch;
      }
    }
    out.push(cell.trim());
    return out;
  }

  function startsBlock(lines, i) {
    const line = lines[i];
    return FENCE.test(line) || HEADING.test(line) || RULE.test(line) || QUOTE.test(line) || ITEM.test(line)
      || (line.includes("|") && i + 1 < lines.length && TABLE_RULE.test(lines[i + 1]) && lines[i + 1].includes("-"));
  }

  function table(lines, i) {
    const head = cells(lines[i]);
    const aligns = cells(lines[i + 1]).map((spec) => {
      const left = spec.startsWith(":");
      const right = spec.endsWith(":");
      return left && right ? "center" : right ? "right" : left ? "left" : null;
    });
    const row = (values, tag) => node("tr", {}, head.map((_, column) => {
      const attrs = aligns[column] ? { class: `align-${aligns[column]}` } : {};
      return node(tag, tag === "th" ? { ...attrs, scope: "col" } : attrs, inline(values[column] || ""));
    }));
    const body = [];
    let j = i + 2;
    while (j < lines.length && lines[j].trim() && lines[j].includes("|")) {
      body.push(row(cells(lines[j]), "td"));
      j += 1;
    }
    const element = node("table", {}, [node("thead", {}, [row(head, "th")]), node("tbody", {}, body)]);
    // The wrapper scrolls a wide table sideways: a keyboard can reach it, and it says what it holds.
    return [node("div", { class: "table-wrap", tabindex: "0", role: "region", "aria-label": "Table" }, [element]), j];
  }

  function list(lines, i) {
    const first = lines[i].match(ITEM);
    const indent = indentOf(first[1]);
    const ordered = /\d/.test(first[2]);
    const attrs = ordered && parseInt(first[2], 10) !== 1 ? { start: String(parseInt(first[2], 10)) } : {};
    const items = [];
    let j = i;
    while (j < lines.length) {
      const match = lines[j].match(ITEM);
      if (!match || indentOf(match[1]) !== indent || /\d/.test(match[2]) !== ordered) break;
      // The item's own lines: its first, then continuation lines and anything indented deeper than its marker.
      const own = [match[3]];
      j += 1;
      while (j < lines.length) {
        const line = lines[j];
        if (!line.trim()) {
          const next = lines[j + 1];
          if (next !== undefined && next.trim() && indentOf(next) > indent) {
            own.push("");
            j += 1;
            continue;
          }
          break;
        }
        const nested = line.match(ITEM);
        if (nested && indentOf(nested[1]) <= indent) break;
        if (!nested && indentOf(line) <= indent && startsBlock(lines, j)) break;
        own.push(indentOf(line) > indent ? line.replace(/^\s+/, (space) => space.slice(Math.min(space.length, indent + 2))) : line.trim());
        j += 1;
      }
      const children = blocks(own);
      // A tight item's paragraph is its text, without a <p> around it.
      const unwrapped = children.length && children[0].tagName === "P" ? [...children[0].childNodes, ...children.slice(1)] : children;
      items.push(node("li", {}, unwrapped));
      while (j < lines.length && !lines[j].trim() && lines[j + 1] !== undefined && ITEM.test(lines[j + 1])
        && indentOf(lines[j + 1].match(ITEM)[1]) === indent) j += 1;
    }
    return [node(ordered ? "ol" : "ul", attrs, items), j];
  }

  function blocks(lines) {
    const out = [];
    let i = 0;
    while (i < lines.length) {
      const line = lines[i];
      if (!line.trim()) {
        i += 1;
        continue;
      }
      const fence = line.match(FENCE);
      if (fence) {
        const body = [];
        i += 1;
        while (i < lines.length && !new RegExp(`^ {0,3}${fence[1][0]}{${fence[1].length},}\\s*$`).test(lines[i])) {
          body.push(lines[i]);
          i += 1;
        }
        i += 1;
        const attrs = fence[2] ? { "data-language": fence[2] } : {};
        out.push(node("pre", {}, [node("code", attrs, [body.join("\n")])]));
        continue;
      }
      if (indentOf(line) >= 4) {
        const body = [];
        while (i < lines.length && (indentOf(lines[i]) >= 4 || !lines[i].trim())) {
          body.push(lines[i].replace(/^( {4}|\t)/, ""));
          i += 1;
        }
        out.push(node("pre", {}, [node("code", {}, [body.join("\n").replace(/\n+$/, "")])]));
        continue;
      }
      const heading = line.match(HEADING);
      if (heading) {
        out.push(node(`h${Math.min(6, heading[1].length + headingShift)}`, {}, inline(heading[2] || "")));
        i += 1;
        continue;
      }
      if (RULE.test(line)) {
        out.push(node("hr"));
        i += 1;
        continue;
      }
      if (QUOTE.test(line)) {
        const quoted = [];
        while (i < lines.length && lines[i].trim() && (QUOTE.test(lines[i]) || !startsBlock(lines, i))) {
          quoted.push(lines[i].replace(QUOTE, ""));
          i += 1;
        }
        out.push(node("blockquote", {}, blocks(quoted)));
        continue;
      }
      if (ITEM.test(line)) {
        const [element, next] = list(lines, i);
        out.push(element);
        i = next;
        continue;
      }
      if (line.includes("|") && i + 1 < lines.length && TABLE_RULE.test(lines[i + 1]) && lines[i + 1].includes("-")) {
        const [element, next] = table(lines, i);
        out.push(element);
        i = next;
        continue;
      }
      const paragraph = [line.trim()];
      let tag = "p";
      i += 1;
      while (i < lines.length && lines[i].trim() && !startsBlock(lines, i)) {
        if (/^ {0,3}=+\s*$/.test(lines[i])) {
          // A line of `===` under a paragraph makes it a heading (setext).
          tag = `h${Math.min(6, 1 + headingShift)}`;
          i += 1;
          break;
        }
        paragraph.push(lines[i].trimStart());
        i += 1;
      }
      out.push(node(tag, {}, inline(paragraph.join("\n"))));
    }
    return out;
  }

  // A fragment of elements and text nodes for `text`; nothing of it is ever parsed as HTML. `topLevel` is the
  // level a `#` heading takes (the page's own headings come first: the answer's `#` is an h3 under the page's h2).
  function render(text, topLevel = 1) {
    headingShift = Math.max(0, Math.min(5, topLevel - 1));
    const fragment = document.createDocumentFragment();
    fragment.append(...blocks(String(text || "").replace(/\r\n?/g, "\n").split("\n")));
    return fragment;
  }

  return { render, safeHref };
})();
