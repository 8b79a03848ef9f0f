//! The app: the window with the web UI, the tray, and the thread that owns
//! the daemon. Everything GTK lives on the main thread (tao's event loop);
//! other threads talk to it through the loop's user events.

use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{Context, Result};
use tao::dpi::LogicalSize;
use tao::event::{Event, WindowEvent};
use tao::event_loop::{ControlFlow, EventLoopBuilder, EventLoopProxy};
use tao::platform::unix::WindowExtUnix;
use tao::window::{Icon, WindowBuilder};
use tray_icon::menu::MenuEvent;
use wry::{WebViewBuilder, WebViewBuilderExtUnix};

use crate::autostart::{Files, Service};
use crate::bridge::{self, Bridge};
use crate::daemon::{self, Daemon};
use crate::status::{EngineState, Poller};
use crate::tray::{Action, Tray};
use crate::{icons, notify, paths, protocol, test_hook};

const SHIM: &str = include_str!("shim.js");

/// How long the window's first load waits for a starting daemon.
const DAEMON_START_WAIT: Duration = Duration::from_secs(30);

/// How often the tray's status is refreshed.
const POLL: Duration = Duration::from_millis(1500);

#[derive(Debug)]
pub enum UserEvent {
    Bridge(bridge::Event),
    Status(EngineState),
    Menu(MenuEvent),
    /// Something went wrong that the user should hear about.
    Problem(String),
    /// A line from the test hook's script.
    Report(String),
}

/// What the daemon thread is asked to do.
enum Command {
    Start,
    Stop,
    /// Stop a daemon the app started, then answer.
    Quit(mpsc::Sender<()>),
}

pub struct Settings {
    pub socket: PathBuf,
    pub mlxr: PathBuf,
    pub home: PathBuf,
}

impl Settings {
    pub fn from_env() -> Result<Settings> {
        let env = &paths::process_env;
        let home = paths::home(env).context("neither MLXR_HOME nor HOME is set")?;
        let socket = paths::socket(env).context("no place for the daemon's socket")?;
        let own = std::env::current_exe().ok();
        Ok(Settings {
            socket,
            mlxr: paths::mlxr_bin(env, own.as_deref()),
            home,
        })
    }

    fn service(&self) -> Service {
        let home = paths::process_env("MLXR_HOME").map(PathBuf::from);
        Service::daemon(&self.mlxr, &self.socket, home.as_deref())
    }
}

/// The thread that owns the daemon: it starts, stops and polls it, so the
/// child's parent thread lives as long as the app (the child gets SIGTERM
/// when its parent thread ends).
fn daemon_thread(settings: &Settings, proxy: EventLoopProxy<UserEvent>) -> mpsc::Sender<Command> {
    let (tx, rx) = mpsc::channel();
    let log = settings.home.join("mlxr-desktop-serve.log");
    let mut daemon = Daemon::new(settings.socket.clone(), settings.mlxr.clone(), log);
    std::thread::spawn(move || {
        let mut poller = Poller::default();
        let send = |e| {
            let _ = proxy.send_event(e);
        };
        loop {
            let command = rx.recv_timeout(POLL);
            let result = match command {
                Ok(Command::Start) => {
                    send(UserEvent::Status(EngineState::Starting));
                    daemon
                        .start()
                        .and_then(|()| daemon.wait_ready(Duration::from_secs(60)).map(|_| ()))
                }
                Ok(Command::Stop) => daemon.stop(),
                Ok(Command::Quit(done)) => {
                    if let Err(e) = daemon.stop() {
                        eprintln!("mlxr-desktop: {e}");
                    }
                    let _ = done.send(());
                    return;
                }
                Err(mpsc::RecvTimeoutError::Timeout) => Ok(()),
                Err(mpsc::RecvTimeoutError::Disconnected) => return,
            };
            if let Err(e) = result {
                send(UserEvent::Problem(e.to_string()));
            }
            let starting = daemon.child_running();
            send(UserEvent::Status(poller.poll(daemon.socket(), starting)));
        }
    });
    tx
}

pub fn run(settings: Settings) -> Result<()> {
    eprintln!(
        "mlxr-desktop: daemon socket {}, mlxr binary {}",
        settings.socket.display(),
        settings.mlxr.display()
    );
    let event_loop = EventLoopBuilder::<UserEvent>::with_user_event().build();
    let proxy = event_loop.create_proxy();

    let icon = icons::draw(128, None);
    let window = WindowBuilder::new()
        .with_title("MLXR")
        .with_window_icon(Some(Icon::from_rgba(icon.pixels, icon.size, icon.size)?))
        .with_inner_size(LogicalSize::new(1180.0, 800.0))
        .build(&event_loop)
        .context("opening the window")?;

    let mut hook = test_hook::Hook::from_env()?;
    let bridge = Bridge::new(settings.socket.clone());
    let ipc_proxy = proxy.clone();
    let protocol_socket = settings.socket.clone();
    let load_proxy = proxy.clone();
    let webview = WebViewBuilder::new()
        .with_initialization_script(SHIM)
        .with_asynchronous_custom_protocol("mlxr".into(), move |_id, request, responder| {
            let socket = protocol_socket.clone();
            std::thread::spawn(move || {
                responder.respond(protocol::respond(&socket, &request, DAEMON_START_WAIT))
            });
        })
        .with_ipc_handler(move |request| {
            let message = request.body();
            if let Some(line) = test_hook::report_line(message) {
                let _ = ipc_proxy.send_event(UserEvent::Report(line));
                return;
            }
            let proxy = ipc_proxy.clone();
            bridge.handle(message, move |e| {
                let _ = proxy.send_event(UserEvent::Bridge(e));
            });
        })
        .with_on_page_load_handler(move |event, url| {
            if let wry::PageLoadEvent::Finished = event {
                eprintln!("mlxr-desktop: loaded {url}");
                let _ = load_proxy.send_event(UserEvent::Report(format!("loaded {url}")));
            }
        })
        .with_url(protocol::START_URL)
        .build_gtk(window.default_vbox().context("the window has no GTK box")?)
        .context("creating the web view")?;

    let login = Files::for_user(&settings.service())?;
    let mut tray = Tray::new(login.is_enabled())?;
    let menu_proxy = proxy.clone();
    MenuEvent::set_event_handler(Some(move |e| {
        let _ = menu_proxy.send_event(UserEvent::Menu(e));
    }));

    let daemon = daemon_thread(&settings, proxy);
    // Connect to a daemon on the socket, or start one.
    let _ = daemon.send(Command::Start);

    event_loop.run(move |event, _, control_flow| {
        *control_flow = ControlFlow::Wait;
        match event {
            Event::WindowEvent {
                event: WindowEvent::CloseRequested,
                ..
            } => {
                // The tray stays; Quit ends the app.
                window.set_visible(false);
            }
            Event::UserEvent(UserEvent::Bridge(e)) => match e.script() {
                Some(js) => {
                    if let Err(err) = webview.evaluate_script(&js) {
                        eprintln!("mlxr-desktop: bridge: {err}");
                    }
                }
                None => {
                    if let bridge::Event::PullFinished { model } = e {
                        notify::notify("Model pulled", &format!("{model} is ready to use."));
                    }
                }
            },
            Event::UserEvent(UserEvent::Status(state)) => {
                if let Err(e) = tray.show(&state) {
                    eprintln!("mlxr-desktop: tray: {e:#}");
                }
            }
            Event::UserEvent(UserEvent::Problem(message)) => {
                notify::notify("MLXR", &message);
            }
            Event::UserEvent(UserEvent::Report(line)) => {
                if let Some(hook) = hook.as_mut() {
                    hook.on_report(&line, &webview);
                }
            }
            Event::UserEvent(UserEvent::Menu(e)) => match Action::from_id(e.id()) {
                Some(Action::Open) => {
                    window.set_visible(true);
                    window.set_focus();
                }
                Some(Action::Pull) => {
                    window.set_visible(true);
                    window.set_focus();
                    let _ = webview.load_url("mlxr://localhost/ui/models");
                }
                Some(Action::Start) => {
                    let _ = daemon.send(Command::Start);
                }
                Some(Action::Stop) => {
                    let _ = daemon.send(Command::Stop);
                }
                Some(Action::LaunchAtLogin) => {
                    let on = tray.launch_at_login_checked();
                    let result = if on { login.enable() } else { login.disable() };
                    match result {
                        Ok(()) => eprintln!(
                            "mlxr-desktop: launch at login {}: {}",
                            if on { "on" } else { "off" },
                            login.file.display()
                        ),
                        Err(e) => {
                            tray.set_launch_at_login(login.is_enabled());
                            notify::notify("MLXR: launch at login", &e.to_string());
                        }
                    }
                }
                Some(Action::Quit) => {
                    let (done_tx, done_rx) = mpsc::channel();
                    if daemon.send(Command::Quit(done_tx)).is_ok() {
                        let _ = done_rx.recv_timeout(Duration::from_secs(30));
                    }
                    eprintln!("mlxr-desktop: quit");
                    *control_flow = ControlFlow::Exit;
                }
                None => {}
            },
            _ => {}
        }
    });
}

/// `mlxr serve`'s arguments as the app runs it (for `--print-service`).
pub fn serve_command(settings: &Settings) -> String {
    let mut parts = vec![settings.mlxr.display().to_string()];
    parts.extend(daemon::serve_args(&settings.socket));
    parts.join(" ")
}
