//! Who is acting: `--operator`, then `UNS_OPERATOR`, then the config file's `operator`,
//! then the account the process runs as. Never "unknown" while the process has an
//! account.

/// The operator for an audit record; `configured` is the config file's, when it has one.
pub fn operator(flag: Option<&str>, configured: Option<&str>) -> String {
    let given = |text: &str| Some(text.trim().to_string()).filter(|o| !o.is_empty());
    flag.and_then(given)
        .or_else(|| {
            std::env::var("UNS_OPERATOR")
                .ok()
                .as_deref()
                .and_then(given)
        })
        .or_else(|| configured.and_then(given))
        .unwrap_or_else(account_name)
}

/// The name of the account of the process's effective user id, from the system's user
/// database (not from `USER`, which any shell can set or unset); `uid:N` when it has no
/// entry there.
pub fn account_name() -> String {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let uid = unsafe { libc::geteuid() };
    lookup(uid).unwrap_or_else(|| format!("uid:{uid}"))
}

fn lookup(uid: libc::uid_t) -> Option<String> {
    let mut buffer = vec![0u8; 4096];
    loop {
        // SAFETY: `passwd` is plain data that getpwuid_r fills in; `buffer` outlives every
        // pointer it stores there, and we pass its true length.
        let mut passwd: libc::passwd = unsafe { std::mem::zeroed() };
        let mut found: *mut libc::passwd = std::ptr::null_mut();
        let code = unsafe {
            libc::getpwuid_r(
                uid,
                &mut passwd,
                buffer.as_mut_ptr().cast(),
                buffer.len(),
                &mut found,
            )
        };
        if code == libc::ERANGE && buffer.len() < 1 << 20 {
            buffer.resize(buffer.len() * 4, 0);
            continue;
        }
        if code != 0 || found.is_null() || passwd.pw_name.is_null() {
            return None;
        }
        // SAFETY: on success pw_name points at a NUL-terminated string inside `buffer`.
        let name = unsafe { std::ffi::CStr::from_ptr(passwd.pw_name) };
        return name
            .to_str()
            .ok()
            .filter(|n| !n.is_empty())
            .map(str::to_string);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_account_name_is_the_real_one() {
        let name = account_name();
        assert!(!name.is_empty() && name != "unknown");
        let id = std::process::Command::new("id").arg("-un").output();
        if let Ok(out) = id
            && out.status.success()
        {
            assert_eq!(name, String::from_utf8_lossy(&out.stdout).trim());
        }
        assert_eq!(operator(Some("  alice "), Some("bob")), "alice");
    }
}
