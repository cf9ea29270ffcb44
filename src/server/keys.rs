//! The API's keys: `UNS_API_KEY` (named `default`) and a keys file of `name key` lines,
//! so each operator's actions are recorded under the name of the key they used.

use std::path::Path;
use subtle::ConstantTimeEq;

/// Shorter keys are refused at start: they can be guessed.
pub const MIN_KEY_LENGTH: usize = 16;

/// The name `UNS_API_KEY` is recorded under.
pub const DEFAULT_NAME: &str = "default";

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum KeyError {
    #[error("{origin}: the key is blank")]
    Blank { origin: String },
    #[error("{origin}: the key contains whitespace")]
    Whitespace { origin: String },
    #[error("{origin}: the key is shorter than {MIN_KEY_LENGTH} characters")]
    Short { origin: String },
    #[error("{origin}: expected `name key`")]
    Malformed { origin: String },
    #[error("{origin}: key name {name:?} may only hold letters, digits and . _ @ -")]
    BadName { origin: String, name: String },
    #[error("{origin}: the name {name:?} is used twice")]
    DuplicateName { origin: String, name: String },
    #[error("{origin}: the same key is given twice")]
    DuplicateKey { origin: String },
    #[error("{path}: {error}")]
    Read { path: String, error: String },

    #[error(
        "no API key: set UNS_API_KEY or pass --api-keys-file (or --insecure-no-auth on a loopback address)"
    )]
    None,
}

/// The named keys the server accepts.
#[derive(Clone)]
pub struct Keys {
    entries: Vec<(String, Vec<u8>)>,
}

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.entries.iter().map(|(n, _)| n.as_str()).collect();
        write!(f, "Keys({names:?})")
    }
}

fn check_key(origin: &str, key: &str) -> Result<(), KeyError> {
    let origin = origin.to_string();
    if key.trim().is_empty() {
        return Err(KeyError::Blank { origin });
    }
    if key.chars().any(char::is_whitespace) {
        return Err(KeyError::Whitespace { origin });
    }
    if key.chars().count() < MIN_KEY_LENGTH {
        return Err(KeyError::Short { origin });
    }
    Ok(())
}

fn check_name(origin: &str, name: &str) -> Result<(), KeyError> {
    let valid = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '@' | '-'));
    if valid {
        Ok(())
    } else {
        Err(KeyError::BadName {
            origin: origin.to_string(),
            name: name.chars().take(64).collect(),
        })
    }
}

/// What to warn of when the keys file at `path` may be read by others than its owner
/// (and the group of a file root owns): it holds every operator's key. A warning, not a
/// refusal, since a secret mounted by an orchestrator is often 0644 inside its container;
/// libpq's own rule for such a `.pgpass` is a warning too.
pub fn exposed(path: &Path) -> Option<String> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let meta = std::fs::metadata(path).ok()?;
    let mode = meta.permissions().mode() & 0o777;
    let allowed = if meta.uid() == 0 { 0o037 } else { 0o077 };
    (mode & allowed != 0).then(|| {
        format!(
            "{}: others may read it (mode {mode:03o}), and it holds every operator's key; make it u=rw (0600), or u=rw,g=r (0640) when root owns it",
            path.display()
        )
    })
}

impl Keys {
    /// The single key of `UNS_API_KEY`, named `default`.
    pub fn single(key: &str) -> Result<Self, KeyError> {
        Self::load(Some(key), None)
    }

    /// `default_key` (from `UNS_API_KEY`) and the keys of `file`; at least one.
    pub fn load(default_key: Option<&str>, file: Option<&Path>) -> Result<Self, KeyError> {
        let mut keys = Keys {
            entries: Vec::new(),
        };
        if let Some(key) = default_key {
            check_key("UNS_API_KEY", key)?;
            keys.add("UNS_API_KEY", DEFAULT_NAME, key)?;
        }
        if let Some(path) = file {
            let read = |err: std::io::Error| KeyError::Read {
                path: path.display().to_string(),
                error: err.to_string(),
            };
            let text = std::fs::read_to_string(path).map_err(read)?;
            for (number, line) in text.lines().enumerate() {
                let origin = format!("{} line {}", path.display(), number + 1);
                let line = line.trim();
                if line.is_empty() || line.starts_with('#') {
                    continue;
                }
                let mut fields = line.split_whitespace();
                let (Some(name), Some(key), None) = (fields.next(), fields.next(), fields.next())
                else {
                    return Err(KeyError::Malformed { origin });
                };
                check_name(&origin, name)?;
                check_key(&origin, key)?;
                keys.add(&origin, name, key)?;
            }
        }
        if keys.entries.is_empty() {
            return Err(KeyError::None);
        }
        Ok(keys)
    }

    fn add(&mut self, origin: &str, name: &str, key: &str) -> Result<(), KeyError> {
        if self.entries.iter().any(|(n, _)| n == name) {
            return Err(KeyError::DuplicateName {
                origin: origin.to_string(),
                name: name.to_string(),
            });
        }
        if self.identify(key.as_bytes()).is_some() {
            return Err(KeyError::DuplicateKey {
                origin: origin.to_string(),
            });
        }
        self.entries
            .push((name.to_string(), key.as_bytes().to_vec()));
        Ok(())
    }

    /// The name of the key `presented` matches. Every key is compared, in constant time,
    /// so the answer takes as long whichever matched.
    pub fn identify(&self, presented: &[u8]) -> Option<&str> {
        let mut found = None;
        for (name, key) in &self.entries {
            let same = presented.len() == key.len() && bool::from(presented.ct_eq(key));
            if same && found.is_none() {
                found = Some(name.as_str());
            }
        }
        found
    }

    pub fn names(&self) -> Vec<&str> {
        self.entries.iter().map(|(n, _)| n.as_str()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weak_keys_are_refused() {
        for (key, want) in [
            ("   ", "blank"),
            ("", "blank"),
            ("short-key", "shorter"),
            ("0123456789abcdef 0", "whitespace"),
            ("0123456789abcdef\t", "whitespace"),
        ] {
            let err = Keys::single(key)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(err.contains(want), "{key:?}: {err}");
        }
        assert!(Keys::single("0123456789abcdef").is_ok());
    }

    #[test]
    fn a_keys_file_names_each_key() -> Result<(), Box<dyn std::error::Error>> {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("keys");
        std::fs::write(
            &path,
            "# on-call keys\nalice aaaaaaaaaaaaaaaaaaaa\n\nbob   bbbbbbbbbbbbbbbbbbbb\n",
        )?;
        // Others may read it: told, whoever owns it; the owner's alone, not.
        for mode in [0o644, 0o604, 0o622] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))?;
            let told = exposed(&path).unwrap_or_default();
            assert!(told.contains(&format!("(mode {mode:03o})")), "{told}");
        }
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
        assert_eq!(exposed(&path), None);
        let keys = Keys::load(Some("dddddddddddddddddddd"), Some(&path))?;
        assert_eq!(keys.names(), ["default", "alice", "bob"]);
        assert_eq!(keys.identify(b"bbbbbbbbbbbbbbbbbbbb"), Some("bob"));
        assert_eq!(keys.identify(b"dddddddddddddddddddd"), Some("default"));
        assert_eq!(keys.identify(b"bbbbbbbbbbbbbbbbbbb"), None);
        std::fs::write(
            &path,
            "alice aaaaaaaaaaaaaaaaaaaa\nalice cccccccccccccccccccc\n",
        )?;
        assert!(matches!(
            Keys::load(None, Some(&path)),
            Err(KeyError::DuplicateName { .. })
        ));
        std::fs::write(&path, "alice\n")?;
        assert!(matches!(
            Keys::load(None, Some(&path)),
            Err(KeyError::Malformed { .. })
        ));
        Ok(())
    }
}
