//! A YAML document that remembers the line of every value, in any YAML style (block or
//! flow), so that an error found long after parsing (a value out of range, two NFs with
//! one name) can still name its line.

use serde::Deserialize;
use serde::de::{Deserializer, Error, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::fmt;

/// A value and the 1-based line it starts on.
#[derive(Debug, Clone)]
pub struct Located {
    pub line: usize,
    pub node: Node,
}

#[derive(Debug, Clone)]
pub enum Node {
    Scalar(Value),
    List(Vec<Located>),
    /// Each entry's key, the line the key is on, and its value.
    Map(Vec<(String, usize, Located)>),
}

/// One step down into a document: a key of a mapping or an index of a list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Key(String),
    Index(usize),
}

impl Step {
    pub fn key(k: &str) -> Step {
        Step::Key(k.to_string())
    }
}

impl Located {
    /// The value without lines, as serde reads settings.
    pub fn to_value(&self) -> Value {
        match &self.node {
            Node::Scalar(v) => v.clone(),
            Node::List(items) => Value::Array(items.iter().map(Located::to_value).collect()),
            Node::Map(entries) => Value::Object(entries.iter().map(|(k, _, v)| (k.clone(), v.to_value())).collect()),
        }
    }

    /// The mapping's keys, if this is a mapping.
    pub fn keys(&self) -> Option<impl Iterator<Item = &str>> {
        match &self.node {
            Node::Map(entries) => Some(entries.iter().map(|(k, _, _)| k.as_str())),
            _ => None,
        }
    }

    /// The value under `key`, if this is a mapping that has it.
    pub fn get(&self, key: &str) -> Option<&Located> {
        match &self.node {
            Node::Map(entries) => entries.iter().find(|(k, _, _)| k == key).map(|(_, _, v)| v),
            _ => None,
        }
    }

    /// The line where `path` ends: a key's own line, a list item's line, or, when the
    /// path goes past the document, the line of the last step that exists.
    pub fn line_at(&self, path: &[Step]) -> usize {
        self.walk(path, self.line)
    }

    fn walk(&self, path: &[Step], here: usize) -> usize {
        match (path.first(), &self.node) {
            (Some(Step::Key(k)), Node::Map(entries)) => match entries.iter().find(|(e, _, _)| e == k) {
                Some((_, key_line, child)) => child.walk(&path[1..], *key_line),
                None => here,
            },
            (Some(Step::Index(i)), Node::List(items)) => match items.get(*i) {
                Some(child) => child.walk(&path[1..], child.line),
                None => here,
            },
            _ => here,
        }
    }

    /// The map, or empty when the value is absent (`run:` with nothing after it).
    pub fn map_or_empty(&self) -> Option<Map<String, Value>> {
        match self.to_value() {
            Value::Object(m) => Some(m),
            Value::Null => Some(Map::new()),
            _ => None,
        }
    }
}

/// The steps of a path written as text (`routes[3].prefix`), as NFs name their keys.
pub fn steps_of_text(path: &str) -> Vec<Step> {
    let mut steps = Vec::new();
    for part in path.split('.').filter(|p| !p.is_empty()) {
        let mut pieces = part.split('[');
        if let Some(key) = pieces.next().filter(|k| !k.is_empty()) {
            steps.push(Step::key(key));
        }
        for index in pieces {
            match index.trim_end_matches(']').parse() {
                Ok(i) => steps.push(Step::Index(i)),
                Err(_) => return steps,
            }
        }
    }
    steps
}

impl<'de> Deserialize<'de> for Located {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let spanned = serde_saphyr::Spanned::<Node>::deserialize(d)?;
        Ok(Located {
            line: spanned.referenced.line() as usize,
            node: spanned.value,
        })
    }
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(NodeVisitor)
    }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Node;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a YAML value")
    }
    fn visit_bool<E: Error>(self, v: bool) -> Result<Node, E> {
        Ok(Node::Scalar(Value::Bool(v)))
    }
    fn visit_i64<E: Error>(self, v: i64) -> Result<Node, E> {
        Ok(Node::Scalar(Value::from(v)))
    }
    fn visit_u64<E: Error>(self, v: u64) -> Result<Node, E> {
        Ok(Node::Scalar(Value::from(v)))
    }
    fn visit_f64<E: Error>(self, v: f64) -> Result<Node, E> {
        Ok(Node::Scalar(Value::from(v)))
    }
    fn visit_str<E: Error>(self, v: &str) -> Result<Node, E> {
        Ok(Node::Scalar(Value::String(v.to_string())))
    }
    fn visit_unit<E: Error>(self) -> Result<Node, E> {
        Ok(Node::Scalar(Value::Null))
    }
    fn visit_none<E: Error>(self) -> Result<Node, E> {
        Ok(Node::Scalar(Value::Null))
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Node, D::Error> {
        Node::deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Located>()? {
            items.push(item);
        }
        Ok(Node::List(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
        let mut entries: Vec<(String, usize, Located)> = Vec::new();
        while let Some(key) = map.next_key::<serde_saphyr::Spanned<Value>>()? {
            let key_line = key.referenced.line() as usize;
            let key = match key.value {
                Value::String(s) => s,
                other => other.to_string(),
            };
            let value = map.next_value::<Located>()?;
            if entries.iter().any(|(k, _, _)| *k == key) {
                return Err(A::Error::custom(format!("`{key}` is given twice")));
            }
            entries.push((key, key_line, value));
        }
        Ok(Node::Map(entries))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(text: &str) -> Located {
        serde_saphyr::from_str(text).unwrap()
    }

    #[test]
    fn lines_in_block_and_flow_style() {
        let t = tree(
            "# c\nrun:\n  batch: 32\n  cores: [0,\n    1]\nchain:\n  - noop\n  - synthetic: { cycles: 10,\n      accesses: 4 }\n",
        );
        let at = |p: &[Step]| t.line_at(p);
        assert_eq!(at(&[Step::key("run"), Step::key("batch")]), 3);
        assert_eq!(at(&[Step::key("run"), Step::key("cores"), Step::Index(1)]), 5);
        assert_eq!(
            at(&[
                Step::key("chain"),
                Step::Index(1),
                Step::key("synthetic"),
                Step::key("accesses")
            ]),
            9
        );
        assert_eq!(at(&[Step::key("run"), Step::key("nothing")]), 2, "the section's line");
        assert_eq!(at(&[Step::key("chain"), Step::Index(1)]), 8);
        assert_eq!(at(&[Step::key("chain"), Step::Index(1), Step::key("synthetic")]), 8);
        assert_eq!(
            t.to_value(),
            serde_json::json!({"run": {"batch": 32, "cores": [0, 1]}, "chain": ["noop", {"synthetic": {"cycles": 10, "accesses": 4}}]})
        );
    }

    #[test]
    fn text_paths_become_steps() {
        assert_eq!(
            steps_of_text("routes[3].prefix"),
            vec![Step::key("routes"), Step::Index(3), Step::key("prefix")]
        );
        assert_eq!(steps_of_text(""), vec![]);
        assert_eq!(
            steps_of_text("a[1][2]"),
            vec![Step::key("a"), Step::Index(1), Step::Index(2)]
        );
    }

    #[test]
    fn duplicate_keys_are_refused() {
        assert!(serde_saphyr::from_str::<Located>("a: 1\na: 2\n").is_err());
    }
}
