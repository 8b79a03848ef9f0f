//! The tray icon and its menu (a StatusNotifierItem with a
//! com.canonical.dbusmenu menu on Linux, through libayatana-appindicator).

use anyhow::{Context, Result};
use tray_icon::menu::{CheckMenuItem, Menu, MenuId, MenuItem, PredefinedMenuItem};
use tray_icon::{Icon, TrayIcon, TrayIconBuilder};

use crate::icons;
use crate::status::EngineState;

/// What a menu entry does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Open,
    Pull,
    Start,
    Stop,
    LaunchAtLogin,
    Quit,
}

impl Action {
    const ALL: [Action; 6] = [
        Action::Open,
        Action::Pull,
        Action::Start,
        Action::Stop,
        Action::LaunchAtLogin,
        Action::Quit,
    ];

    fn id(self) -> &'static str {
        match self {
            Action::Open => "open",
            Action::Pull => "pull",
            Action::Start => "start",
            Action::Stop => "stop",
            Action::LaunchAtLogin => "launch-at-login",
            Action::Quit => "quit",
        }
    }

    pub fn from_id(id: &MenuId) -> Option<Action> {
        Action::ALL.into_iter().find(|a| a.id() == id.0)
    }

    /// The entry's label.
    pub fn label(self) -> &'static str {
        match self {
            Action::Open => "Open MLXR",
            Action::Pull => "Pull a model…",
            Action::Start => "Start the engine",
            Action::Stop => "Stop the engine",
            Action::LaunchAtLogin => "Launch at login",
            Action::Quit => "Quit MLXR",
        }
    }
}

/// The tray's status lines for `state`: the engine, then its models.
pub fn status_lines(state: &EngineState) -> (String, String) {
    let models = match state {
        EngineState::Running { models, busy, .. } if !models.is_empty() => {
            let busy = if *busy > 0 {
                format!(" ({busy} generating)")
            } else {
                String::new()
            };
            format!("Loaded: {}{busy}", models.join(", "))
        }
        EngineState::Running { .. } => "No model loaded".into(),
        EngineState::Loading => "Requests wait for the load".into(),
        _ => "No models".into(),
    };
    (state.summary(), models)
}

pub struct Tray {
    icon: TrayIcon,
    status: MenuItem,
    models: MenuItem,
    start: MenuItem,
    stop: MenuItem,
    launch_at_login: CheckMenuItem,
    shown: Option<EngineState>,
}

fn tooltip(state: &EngineState) -> &'static str {
    match state {
        EngineState::Stopped => "MLXR: stopped",
        EngineState::Starting => "MLXR: starting",
        EngineState::Loading => "MLXR: loading a model",
        EngineState::Running { .. } => "MLXR: running",
    }
}

fn icon_for(state: &EngineState) -> Result<Icon> {
    let rgba = icons::draw(32, Some(icons::state_color(state)));
    Icon::from_rgba(rgba.pixels, rgba.size, rgba.size).context("the tray icon")
}

impl Tray {
    pub fn new(launch_at_login: bool) -> Result<Self> {
        let item = |a: Action| MenuItem::with_id(a.id(), a.label(), true, None);
        let status = MenuItem::new("MLXR", false, None);
        let models = MenuItem::new("", false, None);
        let start = item(Action::Start);
        let stop = item(Action::Stop);
        let login = CheckMenuItem::with_id(
            Action::LaunchAtLogin.id(),
            Action::LaunchAtLogin.label(),
            true,
            launch_at_login,
            None,
        );
        let menu = Menu::new();
        menu.append_items(&[
            &status,
            &models,
            &PredefinedMenuItem::separator(),
            &item(Action::Open),
            &item(Action::Pull),
            &PredefinedMenuItem::separator(),
            &start,
            &stop,
            &login,
            &PredefinedMenuItem::separator(),
            &item(Action::Quit),
        ])
        .context("building the tray menu")?;
        let icon = TrayIconBuilder::new()
            .with_id("mlxr")
            .with_menu(Box::new(menu))
            .with_tooltip("MLXR")
            .with_title("MLXR")
            .with_icon(icon_for(&EngineState::Stopped)?)
            .build()
            .context("creating the tray icon")?;
        let mut tray = Tray {
            icon,
            status,
            models,
            start,
            stop,
            launch_at_login: login,
            shown: None,
        };
        tray.show(&EngineState::Stopped)?;
        Ok(tray)
    }

    /// Shows `state` (the icon changes only when the state's kind does).
    pub fn show(&mut self, state: &EngineState) -> Result<()> {
        if self.shown.as_ref() == Some(state) {
            return Ok(());
        }
        let (status, models) = status_lines(state);
        self.status.set_text(status);
        self.models.set_text(models);
        let stopped = *state == EngineState::Stopped;
        self.start.set_enabled(stopped);
        self.stop.set_enabled(!stopped);
        let kind_changed = self
            .shown
            .as_ref()
            .is_none_or(|s| std::mem::discriminant(s) != std::mem::discriminant(state));
        if kind_changed {
            self.icon.set_icon(Some(icon_for(state)?))?;
            self.icon.set_tooltip(Some(tooltip(state)))?;
        }
        self.shown = Some(state.clone());
        Ok(())
    }

    pub fn set_launch_at_login(&self, on: bool) {
        self.launch_at_login.set_checked(on);
    }

    pub fn launch_at_login_checked(&self) -> bool {
        self.launch_at_login.is_checked()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip() {
        for a in Action::ALL {
            assert_eq!(Action::from_id(&MenuId::new(a.id())), Some(a));
        }
        assert_eq!(Action::from_id(&MenuId::new("nope")), None);
    }

    #[test]
    fn status_lines_name_the_models() {
        let state = EngineState::Running {
            models: vec!["smollm2:latest".into()],
            busy: 1,
            tokens_per_s: None,
        };
        assert_eq!(
            status_lines(&state),
            (
                "MLXR is running".to_string(),
                "Loaded: smollm2:latest (1 generating)".to_string()
            )
        );
        assert_eq!(status_lines(&EngineState::Stopped).1, "No models");
    }
}
