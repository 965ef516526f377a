//! Running `ip` and turning its failures into errors that say what was asked and why it
//! failed.

use std::process::Command;

#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    #[error("`{command}` failed: {reason}")]
    Command { command: String, reason: String },
    #[error("{0}")]
    Privilege(String),
    #[error("`ip` (iproute2) is needed to build namespaces and links: {0}")]
    NoIp(String),
    #[error("interface name `{0}`: 1 to 15 bytes, no `/` or space (the kernel's limit)")]
    BadName(String),
    #[error("{0}: {1}")]
    Counters(String, String),
    #[error("could not remove everything: {}", .0.join("; "))]
    TearDown(Vec<String>),
    #[error("SR-IOV: {0}")]
    Sriov(String),
    #[error("entering namespace {0}: {1}")]
    Enter(String, String),
}

impl TopologyError {
    /// The same error, explained when it is the kernel refusing an unprivileged process.
    pub(crate) fn needs_privilege(self) -> TopologyError {
        match self {
            TopologyError::Command { command, reason }
                if reason.contains("Operation not permitted") || reason.contains("Permission denied") =>
            {
                TopologyError::Privilege(format!(
                    "`{command}`: {reason}; network namespaces need root or the capabilities CAP_SYS_ADMIN and CAP_NET_ADMIN (AF_XDP also CAP_BPF and CAP_NET_RAW)"
                ))
            }
            other => other,
        }
    }
}

/// Runs `ip ARGS`; its standard output, or an error with the command and its message.
pub(crate) fn ip(args: &[&str]) -> Result<String, TopologyError> {
    run("ip", args)
}

/// Runs a program; its standard output, or an error with the command and its message.
pub(crate) fn run(program: &str, args: &[&str]) -> Result<String, TopologyError> {
    let command = format!("{program} {}", args.join(" "));
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| TopologyError::Command {
            command: command.clone(),
            reason: e.to_string(),
        })?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let reason = match stderr.trim() {
            "" => format!("{}", out.status),
            text => text.to_string(),
        };
        Err(TopologyError::Command { command, reason })
    }
}

pub(crate) fn check_ip_present() -> Result<(), TopologyError> {
    match Command::new("ip").arg("-V").output() {
        Ok(out) if out.status.success() => Ok(()),
        Ok(out) => Err(TopologyError::NoIp(
            String::from_utf8_lossy(&out.stderr).trim().to_string(),
        )),
        Err(e) => Err(TopologyError::NoIp(format!("{e} (Debian: apt-get install iproute2)"))),
    }
}
