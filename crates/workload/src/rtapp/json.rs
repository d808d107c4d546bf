//! A JSON reader as lenient as rt-app's inputs need: `/* */` and `//` comments, trailing commas,
//! duplicate keys (kept, in order: workgen-style files repeat `run` and `sleep` at one level), and
//! workgen's bare keys (`"suspend",` with no value reads as an empty string). Every value remembers its
//! line and column for error messages.

/// A JSON value with its position.
#[derive(Clone, Debug, PartialEq)]
pub struct Json {
    /// The value.
    pub v: Value,
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub col: usize,
}

/// The JSON value kinds.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// `null`
    Null,
    /// `true` / `false`
    Bool(bool),
    /// A number (integers kept exact when they fit).
    Int(i64),
    /// A non-integer number.
    Float(f64),
    /// A string.
    Str(String),
    /// An array.
    Arr(Vec<Json>),
    /// An object, keys in file order, duplicates kept.
    Obj(Vec<(String, Json)>),
}

impl Json {
    /// The value as an integer (floats with no fraction count).
    pub fn as_i64(&self) -> Option<i64> {
        match self.v {
            Value::Int(i) => Some(i),
            Value::Float(f) if f.fract() == 0.0 && f.abs() < 9e15 => Some(f as i64),
            _ => None,
        }
    }

    /// The value as a string.
    pub fn as_str(&self) -> Option<&str> {
        match &self.v {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The entries of an object.
    pub fn as_obj(&self) -> Option<&[(String, Json)]> {
        match &self.v {
            Value::Obj(o) => Some(o),
            _ => None,
        }
    }

    /// The first value of `key` in an object.
    pub fn get(&self, key: &str) -> Option<&Json> {
        self.as_obj()?.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// A short name of the kind, for messages.
    pub fn kind(&self) -> &'static str {
        match self.v {
            Value::Null => "null",
            Value::Bool(_) => "a boolean",
            Value::Int(_) | Value::Float(_) => "a number",
            Value::Str(_) => "a string",
            Value::Arr(_) => "an array",
            Value::Obj(_) => "an object",
        }
    }
}

/// A syntax error with its position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxError {
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub col: usize,
    /// What was wrong.
    pub msg: String,
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
    line: usize,
    col: usize,
}

/// Parses lenient JSON.
pub fn parse(src: &str) -> Result<Json, SyntaxError> {
    let mut p = Parser { s: src.as_bytes(), i: 0, line: 1, col: 1 };
    p.skip_ws()?;
    let v = p.value(0)?;
    p.skip_ws()?;
    if p.i < p.s.len() {
        return Err(p.err("unexpected text after the top-level value"));
    }
    Ok(v)
}

impl Parser<'_> {
    fn err(&self, msg: impl Into<String>) -> SyntaxError {
        SyntaxError { line: self.line, col: self.col, msg: msg.into() }
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn bump(&mut self) -> Option<u8> {
        let c = self.peek()?;
        self.i += 1;
        if c == b'\n' {
            self.line += 1;
            self.col = 1;
        } else if c & 0xC0 != 0x80 {
            self.col += 1;
        }
        Some(c)
    }

    fn skip_ws(&mut self) -> Result<(), SyntaxError> {
        loop {
            match self.peek() {
                Some(b' ' | b'\t' | b'\n' | b'\r') => {
                    self.bump();
                }
                Some(b'/') if self.s.get(self.i + 1) == Some(&b'*') => {
                    let start = self.err("unterminated /* comment");
                    self.bump();
                    self.bump();
                    loop {
                        match self.bump() {
                            None => return Err(start),
                            Some(b'*') if self.peek() == Some(b'/') => {
                                self.bump();
                                break;
                            }
                            _ => {}
                        }
                    }
                }
                Some(b'/') if self.s.get(self.i + 1) == Some(&b'/') => {
                    while !matches!(self.peek(), None | Some(b'\n')) {
                        self.bump();
                    }
                }
                _ => return Ok(()),
            }
        }
    }

    fn value(&mut self, depth: usize) -> Result<Json, SyntaxError> {
        if depth > 64 {
            return Err(self.err("nested more than 64 levels deep"));
        }
        let (line, col) = (self.line, self.col);
        let v = match self.peek() {
            None => return Err(self.err("unexpected end of file")),
            Some(b'{') => {
                self.bump();
                let mut entries = Vec::new();
                loop {
                    self.skip_ws()?;
                    if self.peek() == Some(b'}') {
                        self.bump();
                        break;
                    }
                    if self.peek() != Some(b'"') {
                        return Err(self.err("expected a quoted key or `}`"));
                    }
                    let (kline, kcol) = (self.line, self.col);
                    let key = self.string()?;
                    self.skip_ws()?;
                    if matches!(self.peek(), Some(b',' | b'}')) {
                        // workgen shorthand: a bare key (`"suspend",`) has an empty value.
                        entries.push((key, Json { v: Value::Str(String::new()), line: kline, col: kcol }));
                    } else {
                        if self.bump() != Some(b':') {
                            return Err(self.err(format!("expected `:` after key \"{key}\"")));
                        }
                        self.skip_ws()?;
                        let v = self.value(depth + 1)?;
                        entries.push((key, v));
                    }
                    self.skip_ws()?;
                    match self.peek() {
                        Some(b',') => {
                            self.bump();
                        }
                        Some(b'}') => {}
                        _ => return Err(self.err("expected `,` or `}` in an object")),
                    }
                }
                Value::Obj(entries)
            }
            Some(b'[') => {
                self.bump();
                let mut items = Vec::new();
                loop {
                    self.skip_ws()?;
                    if self.peek() == Some(b']') {
                        self.bump();
                        break;
                    }
                    items.push(self.value(depth + 1)?);
                    self.skip_ws()?;
                    match self.peek() {
                        Some(b',') => {
                            self.bump();
                        }
                        Some(b']') => {}
                        _ => return Err(self.err("expected `,` or `]` in an array")),
                    }
                }
                Value::Arr(items)
            }
            Some(b'"') => Value::Str(self.string()?),
            Some(b't') => self.word("true", Value::Bool(true))?,
            Some(b'f') => self.word("false", Value::Bool(false))?,
            Some(b'n') => self.word("null", Value::Null)?,
            Some(c) if c == b'-' || c.is_ascii_digit() => self.number()?,
            Some(c) => return Err(self.err(format!("unexpected character `{}`", c as char))),
        };
        Ok(Json { v, line, col })
    }

    fn word(&mut self, w: &str, v: Value) -> Result<Value, SyntaxError> {
        if self.s[self.i..].starts_with(w.as_bytes()) {
            for _ in 0..w.len() {
                self.bump();
            }
            Ok(v)
        } else {
            Err(self.err("expected a value"))
        }
    }

    fn number(&mut self) -> Result<Value, SyntaxError> {
        let start = self.i;
        while matches!(self.peek(), Some(b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')) {
            self.bump();
        }
        let text = std::str::from_utf8(&self.s[start..self.i]).expect("ASCII");
        if let Ok(i) = text.parse::<i64>() {
            return Ok(Value::Int(i));
        }
        text.parse::<f64>().map(Value::Float).map_err(|_| self.err(format!("malformed number `{text}`")))
    }

    fn string(&mut self) -> Result<String, SyntaxError> {
        let start = self.err("unterminated string");
        self.bump();
        let mut out = Vec::new();
        loop {
            match self.bump() {
                None | Some(b'\n') => return Err(start),
                Some(b'"') => break,
                Some(b'\\') => match self.bump() {
                    Some(b'n') => out.push(b'\n'),
                    Some(b't') => out.push(b'\t'),
                    Some(b'r') => out.push(b'\r'),
                    Some(b'b') => out.push(8),
                    Some(b'f') => out.push(12),
                    Some(b'u') => {
                        let hex: Vec<u8> = (0..4).filter_map(|_| self.bump()).collect();
                        let code =
                            std::str::from_utf8(&hex).ok().and_then(|h| u32::from_str_radix(h, 16).ok());
                        let ch = code.and_then(char::from_u32).ok_or_else(|| self.err("bad \\u escape"))?;
                        let mut buf = [0; 4];
                        out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                    }
                    Some(c @ (b'"' | b'\\' | b'/')) => out.push(c),
                    _ => return Err(self.err("unknown escape in string")),
                },
                Some(c) => out.push(c),
            }
        }
        String::from_utf8(out).map_err(|_| self.err("string is not UTF-8"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_rt_app_style_json() {
        let v =
            parse("{ /* c */ \"a\" : 1, // line\n \"a\": [1, 2.5, \"x\",], \"b\": {\"t\": true,}, \"s\", }")
                .unwrap();
        let o = v.as_obj().unwrap();
        assert_eq!(o.len(), 4, "duplicate key kept");
        assert_eq!(v.get("s").unwrap().as_str(), Some(""), "bare key");
        assert_eq!(o[0].1.as_i64(), Some(1));
        assert_eq!(o[1].1.line, 2);
        assert_eq!(v.get("b").unwrap().get("t").unwrap().v, Value::Bool(true));
    }

    #[test]
    fn errors_have_positions() {
        let e = parse("{\n  \"a\": 1\n  \"b\": 2\n}").unwrap_err();
        assert_eq!((e.line, e.msg.as_str()), (3, "expected `,` or `}` in an object"));
        assert!(parse("{ /* open").unwrap_err().msg.contains("unterminated"));
        assert!(parse("[1, 2").is_err());
        assert!(parse("{} x").is_err());
    }
}
