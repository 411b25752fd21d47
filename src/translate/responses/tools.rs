//! The tools of a Responses request: functions, free-form (`custom`) tools, and namespaces of
//! either (Codex sends its tools so, mid-conversation too). Other providers see functions: a
//! free-form tool as a function of one string, a namespaced tool as `namespace__name`; the
//! client's own names are kept (`ClientTools`) for the calls written back to it.

use crate::translate::Unreadable;
use crate::translate::ir::{ClientTools, Conversation, FREE_FORM_ARG, Tool};
use crate::translate::json::{Obj, array, object, str_field};
use serde_json::{Value, json};

/// Function tools, free-form (`custom`) tools, and namespaces of either (`ns`: the namespace
/// being read).
pub(super) fn read_tools(
    c: &mut Conversation,
    tools: &Value,
    ns: Option<&str>,
) -> Result<(), Unreadable> {
    for (i, t) in array(tools, "tools")?.iter().enumerate() {
        let t = object(t, "tools[]")?;
        let name = str_field(t, "name").unwrap_or("");
        let neutral = ClientTools::neutral_name(ns, name);
        if neutral != name {
            let ns = ns.unwrap_or("").to_string();
            c.client_tools
                .namespaced
                .push((neutral.clone(), ns, name.to_string()));
        }
        match str_field(t, "type") {
            Some("function") => {
                let mut tool =
                    crate::translate::json::tool(t, &format!("tools[{i}]"), "parameters")?;
                tool.name = neutral;
                c.tools.push(tool);
            }
            Some("custom") => {
                c.client_tools.free_form.push(neutral.clone());
                c.tools.push(free_form_tool(t, neutral));
            }
            Some("namespace") if ns.is_none() => {
                let inner = t.get("tools").unwrap_or(&Value::Null);
                read_tools(c, inner, Some(name))?;
            }
            // A built-in tool (web search, file search, a shell, ...) runs at OpenAI: another
            // provider answers without it, and says so (`x-ringside-dropped: tools:<type>`).
            Some(ty) if ns.is_none() => c
                .params
                .push((format!("tools:{ty}"), Value::Object(t.clone()))),
            _ => {
                return Err(Unreadable::new(format!(
                    "tools[{i}]: a tool needs a type; a namespace holds functions and custom tools"
                )));
            }
        }
    }
    Ok(())
}

/// A free-form tool as a function of one string; its grammar, if it has one, is said in the
/// description (no other provider constrains a call's text by a grammar).
fn free_form_tool(t: &Obj, name: String) -> Tool {
    let mut description = str_field(t, "description").unwrap_or("").to_string();
    let format = t.get("format");
    if let Some(grammar) = format
        .and_then(|f| f.get("definition"))
        .and_then(Value::as_str)
    {
        let syntax = format
            .and_then(|f| f.get("syntax"))
            .and_then(Value::as_str)
            .unwrap_or("lark");
        description.push_str(&format!(
            "\n\nThe `{FREE_FORM_ARG}` text must follow this {syntax} grammar:\n{grammar}"
        ));
    }
    Tool {
        name,
        description: (!description.is_empty()).then_some(description),
        parameters: json!({"type": "object", "properties": {FREE_FORM_ARG: {"type": "string"}},
            "required": [FREE_FORM_ARG]}),
        strict: None,
    }
}
