//! Kafka's `ssl.principal.mapping.rules` (KIP-371): how a client certificate's subject (its
//! RFC 2253 form) becomes the principal's name. A comma-separated list, the first rule that
//! applies wins:
//!
//! - `DEFAULT`: the subject as it is;
//! - `RULE:pattern/replacement/` with an optional `L` or `U` after the last `/` (lower or
//!   upper case): applies when the pattern matches the whole subject, which becomes the
//!   replacement (`$1` ... the pattern's groups). `\/` is a `/` in the pattern or the
//!   replacement; commas inside a rule belong to it.
//!
//! A subject no rule applies to is refused (the connection closes), as in Kafka. The patterns
//! are Rust's `regex` syntax, which agrees with Java's for what such rules use (classes,
//! groups, lazy quantifiers, anchors); back-references and look-arounds are refused when the
//! setting is read.

use regex::Regex;

#[derive(Debug, Clone)]
enum Rule {
    Default,
    Replace { pattern: Regex, replacement: String, case: Option<char> },
}

/// Parsed rules (never empty: an empty setting is `DEFAULT`).
#[derive(Debug, Clone)]
pub struct Rules {
    rules: Vec<Rule>,
    text: String,
}

impl Default for Rules {
    fn default() -> Self {
        Rules { rules: vec![Rule::Default], text: "DEFAULT".into() }
    }
}

/// Read up to the next unescaped `/`: the text with `\/` as `/`, and the rest after the `/`.
fn until_slash(s: &str) -> Option<(String, &str)> {
    let mut out = String::new();
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '/' => return Some((out, &s[i + 1..])),
            '\\' => match chars.next() {
                Some((_, '/')) => out.push('/'),
                Some((_, n)) => {
                    out.push('\\');
                    out.push(n);
                }
                None => out.push('\\'),
            },
            _ => out.push(c),
        }
    }
    None
}

/// A Java replacement string in `regex`'s syntax: `$1` as `${1}` (Java reads digits only),
/// `\$` as a literal `$$`, `\x` as `x`.
fn replacement(java: &str) -> String {
    let mut out = String::new();
    let mut chars = java.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('$') => out.push_str("$$"),
                Some(n) => out.push(n),
                None => {}
            },
            '$' => {
                let mut digits = String::new();
                while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                    digits.push(*d);
                    chars.next();
                }
                if digits.is_empty() {
                    out.push_str("$$");
                } else {
                    out.push_str(&format!("${{{digits}}}"));
                }
            }
            _ => out.push(c),
        }
    }
    out
}

impl Rules {
    /// Parse the setting; the reason it is refused, naming the bad rule.
    pub fn parse(text: &str) -> Result<Rules, String> {
        let mut rules = Vec::new();
        let mut rest = text.trim();
        while !rest.is_empty() {
            if let Some(after) = rest.strip_prefix("DEFAULT") {
                rules.push(Rule::Default);
                rest = after;
            } else if let Some(after) = rest.strip_prefix("RULE:") {
                let bad = || format!("invalid rule: {rest}");
                let (pattern, after) = until_slash(after).ok_or_else(bad)?;
                let (to, after) = until_slash(after).ok_or_else(bad)?;
                let case = after.chars().next().filter(|c| *c == 'L' || *c == 'U');
                let anchored = Regex::new(&format!("^(?:{pattern})$"))
                    .map_err(|e| format!("invalid rule pattern {pattern}: {e}"))?;
                rules.push(Rule::Replace { pattern: anchored, replacement: replacement(&to), case });
                rest = &after[case.map_or(0, char::len_utf8)..];
            } else {
                return Err(format!("invalid rule: {rest} (expected DEFAULT or RULE:pattern/replacement/[LU])"));
            }
            rest = rest.trim_start();
            match rest.strip_prefix(',') {
                Some(after) => rest = after.trim_start(),
                None if rest.is_empty() => {}
                None => return Err(format!("invalid rule: {rest} (rules are separated by commas)")),
            }
        }
        if rules.is_empty() {
            return Ok(Rules::default());
        }
        Ok(Rules { rules, text: text.trim().to_string() })
    }

    /// The principal's name for a certificate subject, or why none applies.
    pub fn apply(&self, subject: &str) -> Result<String, String> {
        for rule in &self.rules {
            match rule {
                Rule::Default => return Ok(subject.to_string()),
                Rule::Replace { pattern, replacement, case } if pattern.is_match(subject) => {
                    let name = pattern.replace(subject, replacement.as_str()).into_owned();
                    return Ok(match case {
                        Some('L') => name.to_lowercase(),
                        Some('U') => name.to_uppercase(),
                        _ => name,
                    });
                }
                Rule::Replace { .. } => {}
            }
        }
        Err(format!("No rules apply to {subject}, rules [{}]", self.text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Kafka's documented examples and its SslPrincipalMapper tests: groups, case, commas
    /// inside a rule, escaped slashes, DEFAULT as a fallback, no rule applying.
    #[test]
    fn kafka_rules() {
        let r = Rules::parse(
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/, RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L, \
             RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U, DEFAULT",
        )
        .unwrap();
        assert_eq!(r.apply("CN=kafka-server1,OU=ServiceUsers,O=org,C=US").unwrap(), "kafka-server1");
        assert_eq!(r.apply("CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=Cupertino,ST=CA,C=US").unwrap(), "duke@javasoft");
        assert_eq!(r.apply("OU=Eng,cn=Tee,C=US").unwrap(), "TEE");
        assert_eq!(r.apply("O=nobody").unwrap(), "O=nobody", "DEFAULT last");
        let strict = Rules::parse("RULE:^CN=(.*)$/$1x\\/y/").unwrap();
        assert_eq!(strict.apply("CN=a").unwrap(), "ax/y", "$1 followed by letters; an escaped slash");
        assert!(strict.apply("OU=x").unwrap_err().starts_with("No rules apply to OU=x"));
        assert_eq!(Rules::parse("").unwrap().apply("CN=a").unwrap(), "CN=a");
        for bad in ["RULE:^CN=(.*$/$1/", "RULE:abc", "NOPE", "DEFAULT DEFAULT"] {
            assert!(Rules::parse(bad).is_err(), "{bad}");
        }
    }
}
