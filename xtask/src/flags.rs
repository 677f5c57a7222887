//! A task's command line: positional arguments, `--name VALUE` flags read
//! as the types the task asks for, and `--name` switches. A flag that no
//! task reads is an error.

use std::collections::BTreeMap;
use std::fmt::Display;
use std::str::FromStr;

use plant_store_local_support::Result;

pub struct Flags {
    positional: Vec<String>,
    /// Each flag's value; `None` for a switch.
    named: BTreeMap<String, Option<String>>,
}

impl Flags {
    pub fn parse(args: impl Iterator<Item = String>) -> Self {
        let (mut positional, mut named) = (Vec::new(), BTreeMap::new());
        let mut args = args.peekable();
        while let Some(arg) = args.next() {
            match arg.strip_prefix("--") {
                Some(name) => {
                    let value = args.next_if(|value| !value.starts_with("--"));
                    named.insert(name.to_owned(), value);
                }
                None => positional.push(arg),
            }
        }
        positional.reverse();
        Self { positional, named }
    }

    /// The next positional argument.
    pub fn positional(&mut self) -> Option<String> {
        self.positional.pop()
    }

    /// `--name VALUE` as a `T`, if given.
    pub fn optional<T: FromStr<Err: Display>>(&mut self, name: &str) -> Result<Option<T>> {
        match self.named.remove(name) {
            None => Ok(None),
            Some(None) => Err(format!("--{name} needs a value").into()),
            Some(Some(value)) => value
                .parse()
                .map(Some)
                .map_err(|error| format!("--{name} {value:?}: {error}").into()),
        }
    }

    /// `--name VALUE` as a `T`, else `default`.
    pub fn value<T: FromStr<Err: Display>>(&mut self, name: &str, default: T) -> Result<T> {
        Ok(self.optional(name)?.unwrap_or(default))
    }

    /// Whether the switch `--name` is given.
    pub fn switch(&mut self, name: &str) -> Result<bool> {
        match self.named.remove(name) {
            None => Ok(false),
            Some(None) => Ok(true),
            Some(Some(value)) => Err(format!("--{name} takes no value ({value:?})").into()),
        }
    }

    /// An error if anything was given that the task did not read.
    pub fn finish(self) -> Result {
        let unread: Vec<String> = (self.named.keys().map(|name| format!("--{name}")))
            .chain(self.positional)
            .collect();
        if !unread.is_empty() {
            let unread = unread.join(" ");
            return Err(format!("unknown arguments: {unread} (cargo xtask --help)").into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(line: &str) -> Flags {
        Flags::parse(line.split_whitespace().map(str::to_owned))
    }

    #[test]
    fn flags_are_read_as_types_and_anything_unread_is_refused() {
        let mut given = flags("contract-test sam-local --max-examples 5 --smoke");
        assert_eq!(given.positional().as_deref(), Some("contract-test"));
        assert_eq!(given.positional().as_deref(), Some("sam-local"));
        assert_eq!(given.value("max-examples", 100).unwrap(), 5);
        assert_eq!(given.value("seed", 7u64).unwrap(), 7);
        assert!(given.switch("smoke").unwrap());
        assert!(given.finish().is_ok());

        assert!(flags("--rounds many").value("rounds", 20).is_err());
        assert!(flags("--rounds").value("rounds", 20).is_err());
        assert!(flags("--strict yes").switch("strict").is_err());
        let unread = flags("bench --rounds 3").finish().unwrap_err().to_string();
        assert!(
            unread.contains("--rounds") && unread.contains("bench"),
            "{unread}"
        );
    }
}
