//! A real WordPress on 127.0.0.1 for the connector tests and benchmarks: Debian's `wordpress`
//! package (installed by `scripts/install-deps.sh test`, with `mariadb-server` and `php-cli`), a
//! throwaway MariaDB on a socket in a temp dir, PHP's built-in web server on a free port, installed
//! by WordPress's own `wp_install`, with an Application Password for the REST API and a
//! must-use plugin registering a custom post type (`product`). Seeding goes through the REST API.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub const WP_ROOT: &str = "/usr/share/wordpress";
pub const USER: &str = "admin";

pub struct WordPress {
    /// `http://127.0.0.1:PORT`
    pub base: String,
    pub app_password: String,
    http: reqwest::Client,
    php: Child,
    db: Child,
    _dir: tempfile::TempDir,
}

impl Drop for WordPress {
    fn drop(&mut self) {
        for c in [&mut self.php, &mut self.db] {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn need(cmd: &str) -> String {
    for dir in ["/usr/sbin", "/usr/bin", "/sbin", "/bin"] {
        let p = Path::new(dir).join(cmd);
        if p.exists() {
            return p.to_string_lossy().into_owned();
        }
    }
    panic!("{cmd} is missing: scripts/install-deps.sh test installs wordpress, mariadb-server and php-cli");
}

fn run(cmd: &mut Command, what: &str) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn wait_until(what: &str, secs: u64, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !ok() {
        assert!(Instant::now() < deadline, "{what} did not come up within {secs} s");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn user_name() -> String {
    run(Command::new("id").arg("-un"), "id -un").trim().to_string()
}

const MU_PLUGIN: &str = r#"<?php
// Steward's tests: a custom post type shown in the REST API.
add_action('init', function () {
    register_post_type('product', array(
        'public' => true, 'show_in_rest' => true, 'rest_base' => 'products', 'label' => 'Products',
        'supports' => array('title', 'editor', 'author'),
    ));
});
"#;

impl WordPress {
    /// Installs and starts a fresh site (blocking: call it off the async runtime).
    pub fn start() -> WordPress {
        assert!(
            Path::new(WP_ROOT).join("wp-settings.php").exists(),
            "{WP_ROOT} is missing: scripts/install-deps.sh test installs Debian's wordpress package"
        );
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let (datadir, sock) = (d.join("db"), d.join("mysql.sock"));
        let user = user_name();
        run(
            Command::new(need("mariadb-install-db")).args([
                "--no-defaults",
                &format!("--datadir={}", datadir.display()),
                &format!("--user={user}"),
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
            ]),
            "mariadb-install-db",
        );
        let db = Command::new(need("mariadbd"))
            .args([
                "--no-defaults",
                &format!("--datadir={}", datadir.display()),
                &format!("--user={user}"),
                &format!("--socket={}", sock.display()),
                &format!("--pid-file={}", d.join("mysqld.pid").display()),
                &format!("--log-error={}", d.join("mysqld.err").display()),
                "--skip-networking",
                "--skip-grant-tables",
                "--innodb-buffer-pool-size=64M",
                "--innodb-log-file-size=16M",
                "--innodb-flush-log-at-trx-commit=2",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start mariadbd");
        wait_until("mariadbd", 60, || sock.exists());
        let client = need("mariadb");
        wait_until("the database", 30, || {
            Command::new(&client)
                .args([
                    "--no-defaults",
                    &format!("--socket={}", sock.display()),
                    "-u",
                    "root",
                    "-e",
                    "CREATE DATABASE IF NOT EXISTS wp",
                ])
                .status()
                .is_ok_and(|s| s.success())
        });
        let port = free_port();
        let base = format!("http://127.0.0.1:{port}");
        let (site, content) = (d.join("site"), d.join("content"));
        Self::docroot(&site, &content, &sock, &base);
        let install = d.join("install.php");
        std::fs::write(
            &install,
            format!(
                "<?php\ndefine('ABSPATH', '{site}/');\ndefine('WP_INSTALLING', true);\n$_SERVER['HTTP_HOST'] = '127.0.0.1:{port}';\n\
                 require ABSPATH . 'wp-load.php';\nrequire_once ABSPATH . 'wp-admin/includes/upgrade.php';\n\
                 wp_install('Harbour Bakery', '{USER}', 'admin@example.com', true, '', 'admin-password-123');\n\
                 $u = get_user_by('login', '{USER}');\nwp_update_user(array('ID' => $u->ID, 'display_name' => 'Ada Baker'));\n\
                 list($pw, $item) = WP_Application_Passwords::create_new_application_password($u->ID, array('name' => 'steward'));\n\
                 echo $pw, \"\\n\";\n",
                site = site.display()
            ),
        )
        .unwrap();
        let php = need("php");
        let out = run(Command::new(&php).arg(&install).stderr(Stdio::null()), "wp_install");
        let app_password = out.lines().last().unwrap_or_default().trim().to_string();
        assert_eq!(app_password.len(), 24, "no Application Password from the install: {out}");
        let server = Command::new(&php)
            .args(["-S", &format!("127.0.0.1:{port}"), "-t", site.to_str().unwrap()])
            .env("PHP_CLI_SERVER_WORKERS", "4")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start php -S");
        wait_until("php -S", 30, || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok());
        WordPress { base, app_password, http: reqwest::Client::new(), php: server, db, _dir: dir }
    }

    /// The document root: WordPress's files (symlinked), this site's `wp-config.php` and
    /// `index.php` (which set `ABSPATH` here, so Debian's host-based config is not consulted).
    fn docroot(site: &Path, content: &Path, sock: &Path, base: &str) {
        std::fs::create_dir_all(site).unwrap();
        for sub in ["mu-plugins", "plugins", "themes", "uploads"] {
            std::fs::create_dir_all(content.join(sub)).unwrap();
        }
        std::fs::write(content.join("mu-plugins/steward-test.php"), MU_PLUGIN).unwrap();
        for e in std::fs::read_dir(WP_ROOT).unwrap().flatten() {
            let name = e.file_name();
            if name == "wp-config.php" || name == "index.php" || name == "wp-content" {
                continue;
            }
            std::os::unix::fs::symlink(e.path(), site.join(&name)).unwrap();
        }
        std::fs::write(
            site.join("wp-config.php"),
            format!(
                "<?php\ndefine('DB_NAME', 'wp');\ndefine('DB_USER', 'root');\ndefine('DB_PASSWORD', '');\n\
                 define('DB_HOST', 'localhost:{sock}');\ndefine('DB_CHARSET', 'utf8mb4');\n\
                 define('WP_CONTENT_DIR', '{content}');\ndefine('WP_HOME', '{base}');\ndefine('WP_SITEURL', '{base}');\n\
                 define('WP_ENVIRONMENT_TYPE', 'local');\ndefine('AUTOMATIC_UPDATER_DISABLED', true);\n\
                 define('DISABLE_WP_CRON', true);\ndefine('WP_HTTP_BLOCK_EXTERNAL', true);\n$table_prefix = 'wp_';\n\
                 require_once ABSPATH . 'wp-settings.php';\n",
                sock = sock.display(),
                content = content.display()
            ),
        )
        .unwrap();
        std::fs::write(
            site.join("index.php"),
            "<?php\ndefine('ABSPATH', __DIR__ . '/');\ndefine('WP_USE_THEMES', false);\nrequire ABSPATH . 'wp-blog-header.php';\n",
        )
        .unwrap();
    }

    /// One REST call as the admin (Application Password); panics unless it succeeds.
    pub async fn rest(&self, method: reqwest::Method, route: &str, body: Option<Value>) -> Value {
        let mut req = self
            .http
            .request(method, format!("{}/", self.base))
            .query(&[("rest_route", route)])
            .basic_auth(USER, Some(&self.app_password));
        if let Some(b) = body {
            req = req.json(&b);
        }
        let r = req.send().await.unwrap();
        let status = r.status();
        let v: Value = r.json().await.unwrap_or(Value::Null);
        assert!(status.is_success(), "{route}: {status} {v}");
        v
    }

    /// Creates an item of the collection `base` (`posts`, `pages`, `products`); its id.
    pub async fn create(&self, base: &str, title: &str, content: &str, status: &str) -> i64 {
        let v = self
            .rest(
                reqwest::Method::POST,
                &format!("/wp/v2/{base}"),
                Some(json!({"title": title, "content": content, "status": status})),
            )
            .await;
        v["id"].as_i64().unwrap()
    }

    pub async fn update(&self, base: &str, id: i64, body: Value) {
        self.rest(reqwest::Method::POST, &format!("/wp/v2/{base}/{id}"), Some(body)).await;
    }

    /// Moves an item to the trash.
    pub async fn trash(&self, base: &str, id: i64) {
        self.rest(reqwest::Method::DELETE, &format!("/wp/v2/{base}/{id}"), None).await;
    }
}
