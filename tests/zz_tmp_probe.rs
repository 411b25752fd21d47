#[test]
fn probe() {
    let body = std::fs::read("/tmp/cc-try/body.json").unwrap();
    let c = ringside::translate::read(ringside::translate::Api::Messages, &body);
    match c {
        Err(e) => println!("UNREADABLE {e:?}"),
        Ok(c) => {
            let w = ringside::translate::write(
                ringside::translate::Api::Chat,
                &c,
                ringside::translate::TargetModel {
                    model: "gpt-ok",
                    default_max_tokens: 4096,
                },
            );
            match w {
                Err(e) => println!("CANNOT {e:?}"),
                Ok(w) => println!(
                    "OK dropped {:?} {}",
                    w.dropped,
                    String::from_utf8_lossy(&w.body[..300])
                ),
            }
        }
    }
}
