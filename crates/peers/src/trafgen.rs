//! netsniff-ng's `trafgen`: a packet generator on AF_PACKET TX rings (qdisc bypassed by
//! default), sending one frame as fast as it goes from one process pinned to one core.
//! It only sends; what it achieved is read by the caller on the receiving side.

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running trafgen.
pub struct Trafgen {
    child: Option<Child>,
    /// The configuration file it reads (removed when it ends).
    config: std::path::PathBuf,
    pub command: String,
}

/// trafgen's packet configuration for `frame`: its bytes, in hex, between braces.
pub fn config_of(frame: &[u8]) -> String {
    let bytes: Vec<String> = frame.iter().map(|b| format!("{b:#04x}")).collect();
    format!("# one frame, written by sfclab\n{{ {} }}\n", bytes.join(", "))
}

impl Trafgen {
    /// Starts `trafgen` sending `frame` on `dev` (inside `netns` when given), pinned to
    /// `core`, one process. It leaves the machine as it found it: no socket-memory
    /// tuning, no IRQ affinity changes.
    pub fn start(bin: &str, netns: Option<&str>, dev: &str, core: usize, frame: &[u8]) -> Result<Trafgen, String> {
        let config = std::env::temp_dir().join(format!("sfclab-trafgen-{}-{dev}.cfg", std::process::id()));
        std::fs::File::create(&config)
            .and_then(|mut f| f.write_all(config_of(frame).as_bytes()))
            .map_err(|e| format!("{}: {e}", config.display()))?;
        let args: Vec<String> = [
            "--dev",
            dev,
            "--conf",
            &config.display().to_string(),
            "--cpus",
            "1",
            "--no-sock-mem",
            "--notouch-irq",
            "--no-cpu-stats",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let mut launcher = match netns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns]);
                c
            }
            None => Command::new("env"),
        };
        launcher.args(["taskset", "-c", &core.to_string(), bin]).args(&args);
        let command = format!("taskset -c {core} {bin} {}", args.join(" "));
        // trafgen forks its sending process: a group of its own lets `stop` reach both.
        let child = launcher
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start {bin}: {e}"))?;
        Ok(Trafgen {
            child: Some(child),
            config,
            command,
        })
    }

    /// Whether it is still sending (it exits at once on a bad device or configuration).
    pub fn running(&mut self) -> bool {
        self.child.as_mut().is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// Stops it (SIGINT; killed if still there after 5 s); its error output if it had
    /// ended by itself with a failure.
    pub fn stop(mut self) -> Result<(), String> {
        self.end()
    }

    fn end(&mut self) -> Result<(), String> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        let _ = std::fs::remove_file(&self.config);
        let exited_early = matches!(child.try_wait(), Ok(Some(_)));
        if !exited_early {
            signal_group(&child, nix::sys::signal::Signal::SIGINT);
            let asked = Instant::now();
            while matches!(child.try_wait(), Ok(None)) && asked.elapsed() < Duration::from_secs(5) {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        // The forked sender too, whether the parent ended by itself or not.
        signal_group(&child, nix::sys::signal::Signal::SIGKILL);
        let out = child.wait_with_output().map_err(|e| e.to_string())?;
        if exited_early && !out.status.success() {
            return Err(format!(
                "trafgen ended by itself: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(())
    }
}

impl Drop for Trafgen {
    fn drop(&mut self) {
        let _ = self.end();
    }
}

/// Sends `signal` to the process group `child` leads (trafgen and the sender it forks).
fn signal_group(child: &std::process::Child, signal: nix::sys::signal::Signal) {
    if let Ok(pid) = i32::try_from(child.id()) {
        let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid), signal);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_configuration_lists_every_byte_in_hex() {
        assert_eq!(
            config_of(&[0x02, 0, 0xff]),
            "# one frame, written by sfclab\n{ 0x02, 0x00, 0xff }\n"
        );
    }
}
