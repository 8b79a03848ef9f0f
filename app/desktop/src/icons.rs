//! The app's icons, drawn here (no image files to ship or decode): the web
//! UI's blue rounded square, with a dot telling the engine's state in the
//! tray — green running, amber loading, grey stopped.

use crate::status::EngineState;

/// RGBA pixels of a square icon.
pub struct Rgba {
    pub size: u32,
    pub pixels: Vec<u8>,
}

const BLUE: [u8; 3] = [0x3b, 0x5b, 0xdb];
const WHITE: [u8; 3] = [0xff, 0xff, 0xff];

pub fn state_color(state: &EngineState) -> [u8; 3] {
    match state {
        EngineState::Running { .. } => [0x2f, 0x9e, 0x44],
        EngineState::Starting | EngineState::Loading => [0xf0, 0x8c, 0x00],
        EngineState::Stopped => [0x86, 0x8e, 0x96],
    }
}

/// The icon, with a status dot of `dot`'s color when given.
pub fn draw(size: u32, dot: Option<[u8; 3]>) -> Rgba {
    let s = size as f32;
    let radius = s * 0.19;
    let mut pixels = vec![0u8; (size * size * 4) as usize];
    for y in 0..size {
        for x in 0..size {
            let (fx, fy) = (x as f32 + 0.5, y as f32 + 0.5);
            let mut color = None;
            if in_rounded_square(fx, fy, s, radius) {
                color = Some(if in_letter_m(fx / s, fy / s) {
                    WHITE
                } else {
                    BLUE
                });
            }
            if let Some(dot) = dot {
                let (cx, cy, r) = (s * 0.76, s * 0.76, s * 0.24);
                let d = ((fx - cx).powi(2) + (fy - cy).powi(2)).sqrt();
                if d <= r {
                    color = Some(if d >= r - s * 0.05 { WHITE } else { dot });
                }
            }
            if let Some([r, g, b]) = color {
                let i = ((y * size + x) * 4) as usize;
                pixels[i..i + 4].copy_from_slice(&[r, g, b, 0xff]);
            }
        }
    }
    Rgba { size, pixels }
}

fn in_rounded_square(x: f32, y: f32, s: f32, r: f32) -> bool {
    let cx = x.clamp(r, s - r);
    let cy = y.clamp(r, s - r);
    (x - cx).powi(2) + (y - cy).powi(2) <= r * r
}

/// A blocky "M" in the unit square.
fn in_letter_m(u: f32, v: f32) -> bool {
    if !(0.28..=0.72).contains(&v) {
        return false;
    }
    let stem = 0.09;
    let left = (0.22..0.22 + stem).contains(&u);
    let right = (0.78 - stem..0.78).contains(&u);
    // The two diagonals meet in the middle at 60% of the height.
    let t = (v - 0.28) / 0.32;
    let diag = (0.0..=1.0).contains(&t) && {
        let l = 0.22 + t * 0.28;
        let r = 0.78 - t * 0.28;
        (u - l).abs() < stem * 0.6 || (u - r).abs() < stem * 0.6
    };
    left || right || diag
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pixel(icon: &Rgba, x: u32, y: u32) -> [u8; 4] {
        let i = ((y * icon.size + x) * 4) as usize;
        icon.pixels[i..i + 4].try_into().unwrap()
    }

    #[test]
    fn the_dot_shows_the_state() {
        let running = draw(
            32,
            Some(state_color(&EngineState::Running {
                models: vec![],
                busy: 0,
                tokens_per_s: None,
            })),
        );
        let stopped = draw(32, Some(state_color(&EngineState::Stopped)));
        let loading = draw(32, Some(state_color(&EngineState::Loading)));
        assert_eq!(pixel(&running, 24, 24), [0x2f, 0x9e, 0x44, 0xff]);
        assert_eq!(pixel(&loading, 24, 24), [0xf0, 0x8c, 0x00, 0xff]);
        assert_eq!(pixel(&stopped, 24, 24), [0x86, 0x8e, 0x96, 0xff]);
        // Same square elsewhere; transparent corners.
        assert_eq!(pixel(&running, 3, 16), pixel(&stopped, 3, 16));
        assert_eq!(pixel(&running, 0, 0)[3], 0);
        let plain = draw(64, None);
        assert_eq!(plain.pixels.len(), 64 * 64 * 4);
        assert_eq!(pixel(&plain, 8, 32), [0x3b, 0x5b, 0xdb, 0xff]);
    }
}
