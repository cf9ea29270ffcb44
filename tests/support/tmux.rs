//! A real terminal for the tests: a private tmux server, read back as the operator
//! would see it.

use std::time::Duration;

pub struct Tmux {
    socket: String,
    session: String,
}

impl Tmux {
    pub fn start(command: &str) -> Self {
        Self::start_sized(command, 220, 60)
    }

    /// A terminal `columns` wide and `rows` high running `command`.
    pub fn start_sized(command: &str, columns: u16, rows: u16) -> Self {
        let socket = format!(
            "unsctl-test-{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        );
        let session = "t".to_string();
        let status = super::launch("tmux")
            .args([
                "-L",
                &socket,
                "new-session",
                "-d",
                "-s",
                &session,
                "-x",
                &columns.to_string(),
                "-y",
                &rows.to_string(),
            ])
            .arg(format!("env -u NO_COLOR {command}; echo EXIT=$?; sleep 60"))
            .status()
            .expect("tmux (apt-get install tmux)");
        assert!(status.success());
        Self { socket, session }
    }

    pub fn screen(&self) -> String {
        let output = super::launch("tmux")
            .args([
                "-L",
                &self.socket,
                "capture-pane",
                "-p",
                "-J",
                "-S",
                "-200",
                "-t",
                &self.session,
            ])
            .output()
            .expect("capture");
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    pub fn wait_for(&self, text: &str) -> String {
        self.wait_for_count(text, 1)
    }

    /// Waits until `text` is no longer on the screen.
    pub fn wait_while(&self, text: &str) -> String {
        self.wait_screen(&format!("{text:?} to leave the screen"), |screen| {
            !screen.contains(text)
        })
    }

    /// Lets the program set tmux's paste buffer with OSC 52, as a terminal's clipboard.
    pub fn accept_clipboard(&self) {
        let status = super::launch("tmux")
            .args([
                "-L",
                &self.socket,
                "set-option",
                "-g",
                "set-clipboard",
                "on",
            ])
            .status()
            .expect("set-option");
        assert!(status.success());
    }

    /// The newest paste buffer (what OSC 52 put there), if any.
    pub fn clipboard(&self) -> String {
        let output = super::launch("tmux")
            .args(["-L", &self.socket, "show-buffer"])
            .output()
            .expect("show-buffer");
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    pub fn keys(&self, keys: &[&str]) {
        let status = super::launch("tmux")
            .args(["-L", &self.socket, "send-keys", "-t", &self.session])
            .args(keys)
            .status()
            .expect("send-keys");
        assert!(status.success());
    }
}

impl Tmux {
    /// Types `text` and presses Enter.
    pub fn line(&self, text: &str) {
        self.keys(&["-l", text]);
        self.keys(&["Enter"]);
    }

    /// Pastes `text` as a terminal does, in bracketed paste when the program asked for it.
    pub fn paste(&self, text: &str) {
        for args in [
            &["set-buffer", "-b", "pasted", "--", text][..],
            &["paste-buffer", "-p", "-b", "pasted", "-t", &self.session],
        ] {
            let status = super::launch("tmux")
                .args(["-L", &self.socket])
                .args(args)
                .status()
                .expect("paste");
            assert!(status.success());
        }
    }

    pub fn ctrl_c(&self) {
        self.keys(&["C-c"]);
    }

    /// Whether the terminal shows its cursor (it must, once unsctl has exited).
    pub fn cursor_visible(&self) -> bool {
        let output = super::launch("tmux")
            .args([
                "-L",
                &self.socket,
                "display-message",
                "-p",
                "-t",
                &self.session,
            ])
            .arg("#{cursor_flag}")
            .output()
            .expect("display-message");
        String::from_utf8_lossy(&output.stdout).trim() == "1"
    }

    /// Waits until `text` appears `times` times on the screen.
    pub fn wait_for_count(&self, text: &str, times: usize) -> String {
        self.wait_screen(&format!("{times}x {text:?}"), |screen| {
            screen.matches(text).count() >= times
        })
    }

    /// Waits (at most 20 s) until the screen meets `condition`; the screen then.
    pub fn wait_screen(&self, what: &str, condition: impl Fn(&str) -> bool) -> String {
        let mut screen = String::new();
        let met = super::wait_for(Duration::from_secs(20), || {
            screen = self.screen();
            condition(&screen)
        });
        assert!(met, "timed out waiting for {what}:\n{screen}");
        screen
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = super::launch("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .status();
    }
}
