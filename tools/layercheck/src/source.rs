//! Reading one Rust source file for what it imports: comments and literals
//! blanked out, `#[cfg(test)]` items removed, then its `mod` declarations,
//! `use` trees and the paths written inline in code.

/// What one file declares and refers to.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct FileFacts {
    /// Child modules declared with `mod name;` (not under `#[cfg(test)]`).
    pub mods: Vec<String>,
    /// Child modules declared under `#[cfg(test)]`: test code, not checked.
    pub test_mods: Vec<String>,
    /// Every path used, as written (`crate::a::b`, `super::x`, `child::y`).
    pub paths: Vec<Vec<String>>,
    /// `pub use` re-exports: the name they give and the path they name.
    pub reexports: Vec<(String, Vec<String>)>,
}

/// Blank comments, string and character literals (keeping line breaks), so
/// that what remains is code.
pub fn blank_comments_and_literals(src: &str) -> String {
    let b: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(b[i]));
                    i += 1;
                }
            }
        } else if (c == 'r' || (c == 'b' && next == Some('r'))) && raw_string_start(&b, i).is_some() {
            let (hashes, body) = raw_string_start(&b, i).unwrap_or((0, i));
            for ch in &b[i..body] {
                out.push(blank(*ch));
            }
            i = body;
            while i < b.len() {
                if b[i] == '"' && (0..hashes).all(|k| b.get(i + 1 + k) == Some(&'#')) {
                    for _ in 0..=hashes {
                        out.push(' ');
                    }
                    i += 1 + hashes;
                    break;
                }
                out.push(blank(b[i]));
                i += 1;
            }
        } else if c == '"' || (c == 'b' && next == Some('"') && !ident_char(prev(&b, i))) {
            if c == 'b' {
                out.push(' ');
                i += 1;
            }
            out.push(' ');
            i += 1;
            while i < b.len() && b[i] != '"' {
                if b[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < b.len() {
                    out.push(blank(b[i]));
                    i += 1;
                }
            }
            out.push(' ');
            i += 1;
        } else if c == '\'' {
            // A character literal ('x', '\n', '\''), else a lifetime.
            if next == Some('\\') {
                // '\n', '\'', '\u{1F600}': the quote, the backslash and the
                // escaped character, then on to the closing quote.
                out.push_str("   ");
                i += 3;
                while i < b.len() && b[i] != '\'' {
                    out.push(' ');
                    i += 1;
                }
                out.push(' ');
                i += 1;
            } else if b.get(i + 2) == Some(&'\'') {
                out.push_str("   ");
                i += 3;
            } else {
                out.push(c);
                i += 1;
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn prev(b: &[char], i: usize) -> char {
    if i == 0 {
        ' '
    } else {
        b[i - 1]
    }
}

fn ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// For `r"`, `r#"`, `br"` ... at `i` (not inside an identifier): the number
/// of hashes and the index just past the opening quote.
fn raw_string_start(b: &[char], i: usize) -> Option<(usize, usize)> {
    if ident_char(prev(b, i)) {
        return None;
    }
    let mut j = i;
    if b[j] == 'b' {
        j += 1;
    }
    if b.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let mut hashes = 0;
    while b.get(j) == Some(&'#') {
        hashes += 1;
        j += 1;
    }
    (b.get(j) == Some(&'"')).then_some((hashes, j + 1))
}

/// The index just past the item that starts at `i`: through the first `;`
/// at bracket depth 0, or through the `}` that closes its first `{`.
fn item_end(b: &[u8], mut i: usize) -> usize {
    let mut depth = 0i32;
    while i < b.len() {
        match b[i] {
            b'(' | b'[' => depth += 1,
            b')' | b']' => depth -= 1,
            b';' if depth == 0 => return i + 1,
            b'{' if depth == 0 => {
                let mut d = 0;
                while i < b.len() {
                    match b[i] {
                        b'{' => d += 1,
                        b'}' => {
                            d -= 1;
                            if d == 0 {
                                return i + 1;
                            }
                        }
                        _ => {}
                    }
                    i += 1;
                }
                return i;
            }
            _ => {}
        }
        i += 1;
    }
    i
}

/// Skip white space and attributes (`#[...]`) from `i`.
fn skip_attrs(b: &[u8], mut i: usize) -> usize {
    loop {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if i + 1 < b.len() && b[i] == b'#' && b[i + 1] == b'[' {
            let mut d = 0;
            while i < b.len() {
                if b[i] == b'[' {
                    d += 1;
                } else if b[i] == b']' {
                    d -= 1;
                    if d == 0 {
                        i += 1;
                        break;
                    }
                }
                i += 1;
            }
        } else {
            return i;
        }
    }
}

/// Remove every item under `#[cfg(test)]`; returns the code left and the
/// names of test modules declared as files (`#[cfg(test)] mod x;`).
fn strip_test_items(code: &str) -> (String, Vec<String>) {
    let mut b = code.as_bytes().to_vec();
    let mut test_mods = Vec::new();
    let mut from = 0;
    while let Some(pos) = find(&b, b"#[cfg(test)]", from) {
        let start = skip_attrs(&b, pos + b"#[cfg(test)]".len());
        let end = item_end(&b, start);
        let item = String::from_utf8_lossy(&b[start..end]).to_string();
        let words: Vec<&str> = item.split(|c: char| !(c.is_alphanumeric() || c == '_')).filter(|w| !w.is_empty()).collect();
        if let Some(k) = words.iter().position(|w| *w == "mod") {
            if item.trim_end().ends_with(';') {
                if let Some(name) = words.get(k + 1) {
                    test_mods.push(name.to_string());
                }
            }
        }
        for c in &mut b[pos..end] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
        from = end;
    }
    (String::from_utf8_lossy(&b).to_string(), test_mods)
}

fn find(hay: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    (from..hay.len().saturating_sub(needle.len() - 1)).find(|&i| &hay[i..i + needle.len()] == needle)
}

/// Words and `::`, `{`, `}`, `,`, `;`, `*` of code, in order.
fn tokens(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let b: Vec<char> = code.chars().collect();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if ident_char(c) {
            let s = i;
            while i < b.len() && ident_char(b[i]) {
                i += 1;
            }
            out.push(b[s..i].iter().collect());
            continue;
        }
        if c == ':' && b.get(i + 1) == Some(&':') {
            out.push("::".into());
            i += 2;
            continue;
        }
        if !c.is_whitespace() {
            out.push(c.to_string());
        }
        i += 1;
    }
    out
}

/// Expand a `use` tree (the tokens between `use` and `;`) into the paths it
/// names, each with the name it binds (`None` for globs and `self`-less
/// groups).
fn expand_use(toks: &[String]) -> Vec<(Vec<String>, Option<String>)> {
    fn walk(toks: &[String], i: &mut usize, prefix: &[String], out: &mut Vec<(Vec<String>, Option<String>)>) {
        let mut path: Vec<String> = prefix.to_vec();
        while *i < toks.len() {
            let t = toks[*i].as_str();
            match t {
                "::" => *i += 1,
                "{" => {
                    *i += 1;
                    loop {
                        walk(toks, i, &path, out);
                        if *i < toks.len() && toks[*i] == "," {
                            *i += 1;
                            continue;
                        }
                        break;
                    }
                    if *i < toks.len() && toks[*i] == "}" {
                        *i += 1;
                    }
                    return;
                }
                "}" | "," => break,
                "*" => {
                    *i += 1;
                    out.push((path.clone(), None));
                    return;
                }
                "as" => {
                    *i += 1;
                    let alias = toks.get(*i).cloned();
                    *i += 1;
                    let alias = alias.filter(|a| a != "_");
                    out.push((path.clone(), alias));
                    return;
                }
                "self" if path.len() > prefix.len() || !prefix.is_empty() => {
                    // `a::{self, b}` names `a` itself.
                    *i += 1;
                    let name = path.last().cloned();
                    out.push((path.clone(), name));
                    return;
                }
                _ => {
                    path.push(t.to_string());
                    *i += 1;
                }
            }
        }
        if path.len() > prefix.len() {
            let name = path.last().cloned();
            out.push((path, name));
        }
    }
    let mut out = Vec::new();
    let mut i = 0;
    walk(toks, &mut i, &[], &mut out);
    out
}

/// The facts of one file's source.
/// The code of `src` without comments, literals and `#[cfg(test)]` items
/// (line breaks kept, so line numbers still match `src`).
pub fn code_only(src: &str) -> String {
    strip_test_items(&blank_comments_and_literals(src)).0
}

pub fn read(src: &str) -> FileFacts {
    let code = blank_comments_and_literals(src);
    let (code, test_mods) = strip_test_items(&code);
    let toks = tokens(&code);
    let mut f = FileFacts { test_mods, ..Default::default() };
    let mut i = 0;
    while i < toks.len() {
        let t = toks[i].as_str();
        if t == "mod" && toks.get(i + 2).map(String::as_str) == Some(";") {
            if let Some(name) = toks.get(i + 1) {
                f.mods.push(name.clone());
            }
            i += 3;
            continue;
        }
        if t == "use" && (i == 0 || matches!(toks[i - 1].as_str(), ";" | "}" | "{" | ")" | "pub" | "]")) {
            let is_pub = i > 0 && (toks[i - 1] == "pub" || (toks[i - 1] == ")" && toks[..i].iter().rev().take(4).any(|x| x == "pub")));
            let end = (i..toks.len()).find(|&k| toks[k] == ";").unwrap_or(toks.len());
            let tree = &toks[i + 1..end];
            for (path, name) in expand_use(tree) {
                if is_pub {
                    if let Some(n) = &name {
                        f.reexports.push((n.clone(), path.clone()));
                    }
                }
                f.paths.push(path);
            }
            i = end + 1;
            continue;
        }
        // An inline path: a word followed by `::`.
        if ident_char(t.chars().next().unwrap_or(' ')) && toks.get(i + 1).map(String::as_str) == Some("::") {
            let preceded_by_path = i > 0 && toks[i - 1] == "::";
            if !preceded_by_path {
                let mut path = vec![t.to_string()];
                let mut k = i + 1;
                while toks.get(k).map(String::as_str) == Some("::") {
                    match toks.get(k + 1) {
                        Some(w) if ident_char(w.chars().next().unwrap_or(' ')) => {
                            path.push(w.clone());
                            k += 2;
                        }
                        _ => break,
                    }
                }
                f.paths.push(path);
                i = k;
                continue;
            }
        }
        i += 1;
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_strings_and_tests_are_not_code() {
        let src = r##"
            // use crate::a::X;
            /* use crate::b::Y; /* nested */ */
            const S: &str = "crate::c::Z";
            const R: &str = r#"crate::d::W"#;
            fn f<'a>(x: &'a str) -> char { 'x' }
            use crate::real::Thing;
            #[cfg(test)]
            mod tests { use crate::up::High; }
            #[cfg(test)]
            mod more_tests;
        "##;
        let f = read(src);
        assert_eq!(f.paths, vec![vec!["crate".to_string(), "real".into(), "Thing".into()]]);
        assert_eq!(f.test_mods, vec!["more_tests".to_string()]);
    }

    #[test]
    fn use_trees_expand() {
        let f = read("pub use super::{a::{self, B}, c::D as E, f::*}; mod g; x::y::z();");
        let s = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(f.paths.contains(&s(&["super", "a"])));
        assert!(f.paths.contains(&s(&["super", "a", "B"])));
        assert!(f.paths.contains(&s(&["super", "c", "D"])));
        assert!(f.paths.contains(&s(&["super", "f"])));
        assert!(f.paths.contains(&s(&["x", "y", "z"])));
        assert!(f.reexports.contains(&("E".to_string(), s(&["super", "c", "D"]))));
        assert!(f.reexports.contains(&("a".to_string(), s(&["super", "a"]))));
        assert_eq!(f.mods, vec!["g".to_string()]);
    }
}
