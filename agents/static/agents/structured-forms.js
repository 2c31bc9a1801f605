// The dashboard's structured editors (agents/dashboard_forms.py): tables of rows that grow and shrink, and
// for each part with a JSON twin (an agent's analysis plan, voicemail, interruption and transfer settings;
// an agent test) the "Edit as: Form / JSON" choice, which shows one editor and carries the values across:
// switching to JSON writes the form's values into the JSON box, switching back reads them from it. A file of
// its own: the pages' Content-Security-Policy runs no inline script. Without it, both editors show and the
// choice still says which one is saved.
(function () {
  "use strict";

  // --- rows tables -----------------------------------------------------------------------------------
  function addRow(editor, values) {
    const button = editor.querySelector(".rows-add");
    const index = Number(button.dataset.next || "0");
    button.dataset.next = String(index + 1);
    const html = editor.querySelector("template").innerHTML.replaceAll("__index__", String(index));
    const body = editor.querySelector("tbody");
    body.insertAdjacentHTML("beforeend", html.trim());
    const row = body.lastElementChild;
    if (values) setRow(row, values);
    return row;
  }

  function cellName(row, key) {
    const editor = row.closest(".rows-editor");
    return `${editor.dataset.rowsName}-${row.dataset.index}-${key}`;
  }

  function setRow(row, values) {
    for (const [key, value] of Object.entries(values)) {
      const input = row.querySelector(`[name="${cellName(row, key)}"]`);
      if (!input) continue;
      if (input.type === "checkbox") input.checked = Boolean(value);
      else input.value = value == null ? "" : String(value);
    }
  }

  function readRows(editor) {
    const rows = [];
    for (const row of editor.querySelectorAll("tbody .rows-row")) {
      const values = {};
      let typed = false;
      for (const input of row.querySelectorAll("input, select, textarea")) {
        const key = input.name.split("-").pop();
        if (input.type === "checkbox") values[key] = input.checked;
        else {
          values[key] = input.value.trim();
          if (input.tagName !== "SELECT" && values[key]) typed = true;
        }
      }
      if (typed) rows.push(values);
    }
    return rows;
  }

  function writeRows(editor, rows) {
    editor.querySelector("tbody").replaceChildren();
    editor.querySelector(".rows-add").dataset.next = "0";
    for (const values of rows) addRow(editor, values);
    addRow(editor, null); // a blank row to fill
  }

  document.addEventListener("click", (event) => {
    const target = event.target;
    if (!(target instanceof Element)) return;
    if (target.matches(".rows-add")) {
      event.preventDefault();
      const row = addRow(target.closest(".rows-editor"), null);
      row.querySelector("input, select, textarea")?.focus();
    } else if (target.matches(".rows-remove")) {
      event.preventDefault();
      target.closest(".rows-row").remove();
    }
  });

  // --- helpers ----------------------------------------------------------------------------------------
  const field = (form, name) => form.elements.namedItem(name);
  const value = (form, name) => (field(form, name) ? field(form, name).value : "");
  const checked = (form, name) => Boolean(field(form, name) && field(form, name).checked);
  const rowsOf = (form, name) => {
    const editor = form.querySelector(`.rows-editor[data-rows-name="${name}"]`);
    return editor ? readRows(editor) : [];
  };
  function set(form, name, to) {
    const input = field(form, name);
    if (!input) return;
    if (input.type === "checkbox") input.checked = Boolean(to);
    else input.value = to == null ? "" : String(to);
  }
  function setRows(form, name, rows) {
    const editor = form.querySelector(`.rows-editor[data-rows-name="${name}"]`);
    if (editor) writeRows(editor, rows);
  }
  const lines = (text) => text.split("\n").map((line) => line.trim()).filter(Boolean);
  const orNull = (text) => (text.trim() ? text : null);
  const number = (text) => (text.trim() === "" ? undefined : Number(text));
  function jsonOrText(text) {
    try {
      return JSON.parse(text);
    } catch {
      return text;
    }
  }
  const shown = (json) => (typeof json === "string" ? json : JSON.stringify(json));
  const triState = (text) => (text === "yes" ? true : text === "no" ? false : undefined);
  const triText = (flag) => (flag === true ? "yes" : flag === false ? "no" : "");

  // --- the parts: the form's fields -> JSON, and back ----------------------------------------------------
  const SCHEMA_TYPES = ["string", "number", "integer", "boolean"];
  const PARTS = {
    analysis_plan: {
      toJson(form, previous) {
        const rows = rowsOf(form, "plan_structured_fields");
        const stored = previous && previous.structuredData ? previous.structuredData.schema : null;
        let schema = stored && schemaRows(stored) === null && !rows.length ? stored : null;
        if (rows.length) {
          schema = { type: "object", properties: {} };
          for (const row of rows) schema.properties[row.name] = { type: row.type || "string", description: row.description };
          const required = rows.filter((row) => row.required).map((row) => row.name);
          if (required.length) schema.required = required;
        }
        return {
          summary: { enabled: checked(form, "plan_summary_enabled"), prompt: orNull(value(form, "plan_summary_prompt")) },
          structuredData: {
            enabled: checked(form, "plan_structured_enabled"),
            schema,
            prompt: orNull(value(form, "plan_structured_prompt")),
          },
          successEvaluation: {
            enabled: checked(form, "plan_success_enabled"),
            rubric: orNull(value(form, "plan_success_rubric")),
            scale: value(form, "plan_success_scale") || "pass-fail",
          },
        };
      },
      toForm(form, plan) {
        const summary = plan.summary || {};
        const data = plan.structuredData || {};
        const success = plan.successEvaluation || {};
        const rows = schemaRows(data.schema || null);
        if (rows === null) return false; // the table cannot show this schema: stay on JSON
        set(form, "plan_summary_enabled", summary.enabled !== false);
        set(form, "plan_summary_prompt", summary.prompt);
        set(form, "plan_structured_enabled", data.enabled === undefined ? "schema" in data : data.enabled);
        setRows(form, "plan_structured_fields", rows);
        set(form, "plan_structured_prompt", data.prompt);
        set(form, "plan_success_enabled", success.enabled === undefined ? "rubric" in success : success.enabled);
        set(form, "plan_success_rubric", success.rubric);
        set(form, "plan_success_scale", success.scale || "pass-fail");
        return true;
      },
    },
    voicemail: {
      toJson: (form) => ({
        detection: value(form, "voicemail_detection") || "off",
        action: value(form, "voicemail_action") || "hang-up",
        message: value(form, "voicemail_message"),
      }),
      toForm(form, setting) {
        set(form, "voicemail_detection", setting.detection || "off");
        set(form, "voicemail_action", setting.action || "hang-up");
        set(form, "voicemail_message", setting.message || "");
        return true;
      },
    },
    interruption: {
      toJson(form) {
        const setting = { mode: value(form, "interruption_mode") || "adaptive" };
        const minWords = number(value(form, "interruption_min_words"));
        if (minWords !== undefined) setting.minWords = minWords;
        setting.backchannels = checked(form, "interruption_default_backchannels")
          ? null
          : lines(value(form, "interruption_backchannels"));
        const resume = number(value(form, "interruption_resume_after_ms"));
        if (resume !== undefined) setting.resumeAfterMs = resume;
        return setting;
      },
      toForm(form, setting) {
        set(form, "interruption_mode", setting.mode || "adaptive");
        set(form, "interruption_min_words", setting.minWords);
        set(form, "interruption_default_backchannels", setting.backchannels == null);
        set(form, "interruption_backchannels", (setting.backchannels || []).join("\n"));
        set(form, "interruption_resume_after_ms", setting.resumeAfterMs);
        return true;
      },
    },
    transfer: {
      toJson(form) {
        const setting = {
          mode: value(form, "transfer_mode") || "cold",
          briefing: value(form, "transfer_briefing") || "summary",
          message: value(form, "transfer_message"),
        };
        const ring = number(value(form, "transfer_ring_timeout_seconds"));
        if (ring !== undefined) setting.ringTimeoutSeconds = ring;
        return setting;
      },
      toForm(form, setting) {
        set(form, "transfer_mode", setting.mode || "cold");
        set(form, "transfer_briefing", setting.briefing || "summary");
        set(form, "transfer_message", setting.message || "");
        set(form, "transfer_ring_timeout_seconds", setting.ringTimeoutSeconds);
        return true;
      },
    },
    // An agent test (realtime/agent_tests/admin.py): its JSON boxes are turns, caller, variables,
    // tool_mocks, expect and tags.
    agent_test: {
      boxes: ["turns", "caller", "variables", "tool_mocks", "expect", "tags"],
      fields: [
        "turn_rows", "caller_persona", "caller_goal", "caller_max_turns", "variable_rows", "mock_rows",
        "expect_tool_calls", "expect_no_tool_calls", "expect_reply_contains", "expect_reply_matches",
        "expect_transferred", "expect_ended", "expect_criteria", "tag_list",
      ],
      toJson(form) {
        const expect = {};
        const calls = rowsOf(form, "expect_tool_calls").map((row) =>
          row.arguments ? { name: row.name, argumentsInclude: jsonOrText(row.arguments) } : { name: row.name },
        );
        if (calls.length) expect.toolCalls = calls;
        for (const [key, name] of [["noToolCalls", "expect_no_tool_calls"], ["transferred", "expect_transferred"], ["ended", "expect_ended"]]) {
          const flag = triState(value(form, name));
          if (flag !== undefined) expect[key] = flag;
        }
        const contains = lines(value(form, "expect_reply_contains"));
        if (contains.length) expect.replyContains = contains;
        if (value(form, "expect_reply_matches").trim()) expect.replyMatches = value(form, "expect_reply_matches").trim();
        const criteria = lines(value(form, "expect_criteria"));
        if (criteria.length) expect.criteria = criteria;
        const persona = value(form, "caller_persona").trim();
        const goal = value(form, "caller_goal").trim();
        const maxTurns = number(value(form, "caller_max_turns"));
        const caller = persona || goal ? { persona, goal, ...(maxTurns === undefined ? {} : { maxTurns }) } : null;
        const variables = {};
        for (const row of rowsOf(form, "variable_rows")) variables[row.name] = row.value;
        const mocks = rowsOf(form, "mock_rows").map((row) => {
          const mock = { tool: row.tool };
          if (row.arguments) mock.when = { argumentsInclude: jsonOrText(row.arguments) };
          if (row.error) mock.error = row.error;
          else mock.result = jsonOrText(row.result);
          return mock;
        });
        return {
          turns: rowsOf(form, "turn_rows").map((row) => ({ user: row.user })),
          caller,
          variables,
          tool_mocks: mocks,
          expect,
          tags: value(form, "tag_list").split(",").map((tag) => tag.trim()).filter(Boolean),
        };
      },
      toForm(form, parts) {
        setRows(form, "turn_rows", (parts.turns || []).map((turn) => ({ user: turn.user })));
        const caller = parts.caller || {};
        set(form, "caller_persona", caller.persona);
        set(form, "caller_goal", caller.goal);
        set(form, "caller_max_turns", caller.maxTurns);
        setRows(form, "variable_rows", Object.entries(parts.variables || {}).map(([name, value]) => ({ name, value: shown(value) })));
        setRows(
          form,
          "mock_rows",
          (parts.tool_mocks || []).map((mock) => ({
            tool: mock.tool,
            arguments: mock.when ? shown(mock.when.argumentsInclude) : "",
            result: "result" in mock ? shown(mock.result) : "",
            error: mock.error || "",
          })),
        );
        const expect = parts.expect || {};
        setRows(
          form,
          "expect_tool_calls",
          (expect.toolCalls || []).map((call) => ({ name: call.name, arguments: call.argumentsInclude ? shown(call.argumentsInclude) : "" })),
        );
        set(form, "expect_no_tool_calls", triText(expect.noToolCalls));
        set(form, "expect_transferred", triText(expect.transferred));
        set(form, "expect_ended", triText(expect.ended));
        set(form, "expect_reply_contains", (expect.replyContains || []).join("\n"));
        set(form, "expect_reply_matches", expect.replyMatches);
        set(form, "expect_criteria", (expect.criteria || []).join("\n"));
        set(form, "tag_list", (parts.tags || []).join(", "));
        return true;
      },
    },
  };

  function schemaRows(schema) {
    if (schema === null) return [];
    if (typeof schema !== "object" || Object.keys(schema).some((key) => !["type", "properties", "required"].includes(key))) return null;
    const properties = schema.properties;
    const required = schema.required || [];
    if (schema.type !== "object" || !properties || typeof properties !== "object" || !Array.isArray(required)) return null;
    const rows = [];
    for (const [name, prop] of Object.entries(properties)) {
      if (!prop || Object.keys(prop).some((key) => !["type", "description"].includes(key)) || !SCHEMA_TYPES.includes(prop.type)) return null;
      rows.push({ name, type: prop.type, description: prop.description || "", required: required.includes(name) });
    }
    return rows;
  }

  // --- the editor choice -----------------------------------------------------------------------------
  // A part's JSON: one box (an agent's setting) or several (an agent test's parts, by name).
  function readJson(form, part, spec) {
    if (!spec.boxes) return JSON.parse(value(form, part) || "null");
    const parts = {};
    for (const box of spec.boxes) {
      const text = value(form, box).trim();
      parts[box] = text ? JSON.parse(text) : null;
    }
    return parts;
  }
  function writeJson(form, part, spec, json) {
    if (!spec.boxes) return set(form, part, JSON.stringify(json, null, 2));
    for (const box of spec.boxes) set(form, box, json[box] == null ? "" : JSON.stringify(json[box]));
  }

  function show(container, part, editor) {
    for (const row of container.querySelectorAll("[data-editor]")) {
      if (row.dataset.editorPart === part) row.hidden = row.dataset.editor !== editor;
    }
  }

  function mark(form, part, spec) {
    // The rows of the part's two editors: admin fieldset rows (.field-<name>) or any [data-editor] block.
    // An agent setting's editors share its fieldset; an agent test's fill several (spec.fields names them).
    const jsonNames = spec.boxes || [part];
    const container = spec.boxes ? form : form.querySelector(`.editor-choice[data-part="${part}"]`).closest("fieldset") || form;
    for (const row of container.querySelectorAll(".form-row")) {
      if (row.dataset.editor) continue;
      const names = [...row.classList].filter((name) => name.startsWith("field-")).map((name) => name.slice(6));
      if (!names.length || names.includes(`${part}_editor`)) continue;
      if (spec.fields && !names.some((name) => spec.fields.includes(name) || jsonNames.includes(name))) continue;
      row.dataset.editorPart = part;
      row.dataset.editor = names.some((name) => jsonNames.includes(name)) ? "json" : "form";
    }
    return container;
  }

  function problemNote(choice, text) {
    let note = choice.closest(".form-row").querySelector(".editor-problem");
    if (!note) {
      note = document.createElement("p");
      note.className = "editor-problem errornote";
      choice.closest(".form-row").append(note);
    }
    note.textContent = text;
    note.hidden = !text;
  }

  function init(form) {
    const parts = new Set([...form.querySelectorAll("input.editor-choice[data-part]")].map((input) => input.dataset.part));
    for (const part of parts) {
      const spec = PARTS[part];
      if (!spec) continue;
      const group = form.querySelector(`input.editor-choice[data-part="${part}"]`);
      const container = mark(form, part, spec);
      const radios = [...form.querySelectorAll(`input[name="${part}_editor"]`)];
      const current = () => (radios.find((radio) => radio.checked) || radios[0]).value;
      show(container, part, current());
      let previous = current();
      for (const radio of radios) {
        radio.addEventListener("change", () => {
          const next = current();
          if (next === previous) return;
          try {
            if (next === "json") {
              let stored = null;
              try {
                stored = readJson(form, part, spec);
              } catch {
                stored = null;
              }
              writeJson(form, part, spec, spec.toJson(form, stored));
            } else if (!spec.toForm(form, readJson(form, part, spec) || {})) {
              throw new Error("The form cannot show this value (a schema with nested parts): keep editing it as JSON.");
            }
          } catch (error) {
            problemNote(group, error instanceof SyntaxError ? `Not valid JSON: ${error.message}` : error.message);
            radios.find((radio) => radio.value === previous).checked = true;
            return;
          }
          problemNote(group, "");
          previous = next;
          show(container, part, next);
        });
      }
    }
  }

  function start() {
    for (const form of document.querySelectorAll("form")) init(form);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
