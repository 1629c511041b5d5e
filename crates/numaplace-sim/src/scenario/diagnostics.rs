//! Where an error in a scenario file points: the line and column of a span,
//! the field path (`app[2].working_set`), and serde's own errors reworded.

use super::*;

/// Where an error points: a span of the text and a field path.
pub(super) struct Ctx<'a> {
    pub(super) text: &'a str,
    pub(super) origin: &'a str,
}

/// 1-based line and character column of a byte offset (scenario and
/// config errors point with it).
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = text[line_start..offset].chars().count() + 1;
    (line, column)
}

impl Ctx<'_> {
    pub(super) fn err(
        &self,
        span: Option<Range<usize>>,
        field: Option<String>,
        message: String,
    ) -> ScenarioError {
        let (line, column) = match span {
            Some(s) => {
                let (l, c) = line_col(self.text, s.start);
                (Some(l), Some(c))
            }
            None => (None, None),
        };
        ScenarioError {
            origin: self.origin.to_string(),
            line,
            column,
            field,
            message,
        }
    }

    /// An error about value `v` of field `path`.
    pub(super) fn bad(&self, v: &Spanned<Value>, path: &str, message: String) -> ScenarioError {
        self.err(Some(v.span()), Some(path.to_string()), message)
    }

    /// A required key missing from the table at `table_span`.
    pub(super) fn missing(
        &self,
        table_span: Range<usize>,
        path: &str,
        message: String,
    ) -> ScenarioError {
        self.err(Some(table_span), Some(path.to_string()), message)
    }

    /// A serde (syntax or structure) error, located with the outline.
    pub(super) fn toml_error(&self, e: &toml::de::Error) -> ScenarioError {
        let span = e.span();
        let (field, table) = span
            .clone()
            .map_or((None, Table::Top), |s| self.field_at(s));
        let message = rewrite_unknown_field(e.message(), table).unwrap_or_else(|| {
            let m = e
                .message()
                .trim_end()
                .replace("struct RawLinux", "a table ([linux])")
                .replace("struct RawApp", "a table ([[app]])")
                .replace("struct RawPhase", "a table ([[app.phase]])")
                .replace("a sequence", "an array of tables ([[...]])")
                .replace("invalid type: map", "invalid type: a table");
            if let Some(rest) = m.strip_prefix("invalid length ") {
                // `[[linux]]`: "invalid length 1, expected struct RawLinux
                // with 4 elements"
                let expected = rest.split_once(", expected ").map_or("", |(_, e)| e);
                let expected = expected.split(" with ").next().unwrap_or(expected);
                return format!("wrong type: an array of tables, expected {expected}");
            }
            match m.strip_prefix("invalid type: ") {
                Some(rest) => format!("wrong type: {rest}"),
                None => m,
            }
        });
        self.err(span, field, message)
    }

    /// The table path (`app[1].phase[0]`, `linux`, empty at the top) and
    /// kind holding byte `at`.
    pub(super) fn table_at(&self, at: usize) -> (String, Table) {
        let Ok(outline) = toml::from_str::<Outline>(self.text) else {
            return self.table_by_headers(at);
        };
        for (i, app) in outline.app.iter().enumerate() {
            for (j, p) in app.get_ref().phase.iter().enumerate() {
                if p.span().contains(&at) {
                    return (format!("app[{i}].phase[{j}]"), Table::Phase);
                }
            }
            if app.span().contains(&at) {
                return (format!("app[{i}]"), Table::App);
            }
        }
        if let Some(l) = &outline.linux {
            if l.span().contains(&at) {
                return ("linux".to_string(), Table::Linux);
            }
        }
        (String::new(), Table::Top)
    }

    /// [`Self::table_at`] for a text that does not parse: the last table
    /// header before byte `at`, counting `[[app]]` and `[[app.phase]]`.
    pub(super) fn table_by_headers(&self, at: usize) -> (String, Table) {
        let before = &self.text[..at.min(self.text.len())];
        let (mut app, mut phase) = (None::<usize>, 0usize);
        let mut table = Table::Top;
        for line in before.lines() {
            let header: String = line.chars().filter(|c| !c.is_whitespace()).collect();
            match header.split('#').next().unwrap_or("") {
                "[[app]]" => {
                    app = Some(app.map_or(0, |i| i + 1));
                    phase = 0;
                    table = Table::App;
                }
                "[[app.phase]]" => {
                    if table == Table::Phase {
                        phase += 1;
                    }
                    table = Table::Phase;
                }
                "[linux]" => table = Table::Linux,
                h if h.starts_with('[') => table = Table::Top,
                _ => {}
            }
        }
        let i = app.unwrap_or(0);
        match table {
            Table::Top => (String::new(), Table::Top),
            Table::Linux => ("linux".into(), Table::Linux),
            Table::App => (format!("app[{i}]"), Table::App),
            Table::Phase => (format!("app[{i}].phase[{phase}]"), Table::Phase),
        }
    }

    /// The field path of a serde error at `span` and the kind of table
    /// it is in: the key (the text of the span when it is a key, else the
    /// key of its line, else the table header of its line) prefixed by the
    /// table holding that key.
    pub(super) fn field_at(&self, span: Range<usize>) -> (Option<String>, Table) {
        let is_key_char = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
        let start = span.start.min(self.text.len());
        let line_start = self.text[..start].rfind('\n').map_or(0, |i| i + 1);
        let line = self.text[line_start..].lines().next().unwrap_or("");
        // The key starting at the span and followed by `=` (an unknown or
        // duplicate key, also inside an inline table) ...
        let rest = &self.text[start..];
        let run = rest.find(|c: char| !is_key_char(c)).unwrap_or(rest.len());
        let (key, key_at) =
            if run > 0 && rest[run..].trim_start_matches([' ', '\t']).starts_with('=') {
                (Some(rest[..run].to_string()), start)
            } else if line.trim_start().starts_with('[') {
                // ... or the header of a table that has the wrong form
                // (`[app]` for `[[app]]`): named from the table above it ...
                let name = line.trim().trim_matches(['[', ']', ' ']).to_string();
                let (parent, table) = self.table_by_headers(line_start);
                let field = match name.strip_prefix("app.") {
                    Some(sub) if !parent.is_empty() && table != Table::Linux => {
                        let app = parent.split('.').next().unwrap_or("");
                        format!("{app}.{sub}")
                    }
                    _ => name,
                };
                return (Some(field), Table::Top);
            } else {
                // ... or the key of the line the span is on.
                let key = line
                    .split_once('=')
                    .map(|(k, _)| k.trim().trim_matches('"').to_string())
                    .filter(|k| !k.is_empty() && k.chars().all(is_key_char));
                let indent = line.len() - line.trim_start().len();
                (key, line_start + indent)
            };
        let (table, kind) = self.table_at(key_at);
        let field = match (table.is_empty(), key) {
            (true, Some(k)) => Some(k),
            (false, Some(k)) => Some(format!("{table}.{k}")),
            (false, None) => Some(table),
            (true, None) => None,
        };
        (field, kind)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Table {
    Top,
    Linux,
    App,
    Phase,
}

impl Table {
    pub(super) fn describe(self) -> &'static str {
        match self {
            Table::Top => "at the top level",
            Table::Linux => "in [linux]",
            Table::App => "in [[app]]",
            Table::Phase => "in [[app.phase]]",
        }
    }
}

/// serde's "unknown field `x`, expected one of `a`, `b`" as "unknown key
/// `x` in [[app]]; allowed keys: a, b".
pub(super) fn rewrite_unknown_field(message: &str, table: Table) -> Option<String> {
    let rest = message.strip_prefix("unknown field ")?;
    let names: Vec<&str> = rest.split('`').skip(1).step_by(2).collect();
    let (key, allowed) = names.split_first()?;
    Some(format!(
        "unknown key `{key}` {}; allowed keys: {}",
        table.describe(),
        allowed.join(", ")
    ))
}

/// A TOML value as the message shows it: its type and, for scalars, the
/// value.
pub(super) fn shown(v: &Value) -> String {
    match v {
        Value::Array(_) | Value::Table(_) => format!("an {}", v.type_str()),
        _ => format!("{} {v}", v.type_str()),
    }
}
