//! A real WordPress on 127.0.0.1, for the WordPress connector's tests and benchmark: Debian's
//! `wordpress` package (with `mariadb-server` and `php-cli`; `scripts/install-deps.sh test`
//! installs them), a throwaway MariaDB on a socket in a temp dir, PHP's built-in web server on a
//! free port, installed by WordPress's own `wp_install` with an Application Password for the REST
//! API and a must-use plugin registering a custom post type (`product`). Everything goes when the
//! value is dropped.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};

/// Where Debian's package puts WordPress.
pub const WP_ROOT: &str = "/usr/share/wordpress";
/// The administrator the site is installed with.
pub const USER: &str = "admin";
/// The administrator's display name (the `author` of what they write).
pub const AUTHOR: &str = "Ada Baker";

pub struct LocalWordPress {
    /// `http://127.0.0.1:PORT`
    pub base: String,
    /// An Application Password of [`USER`].
    pub app_password: String,
    /// `php -S`, once started.
    php: Option<Child>,
    db: Child,
    dir: tempfile::TempDir,
}

/// `php -S` with `PHP_CLI_SERVER_WORKERS` forks its workers, which outlive a killed parent: it
/// runs in a process group of its own, and the whole group is killed.
impl Drop for LocalWordPress {
    fn drop(&mut self) {
        if let Some(php) = &mut self.php {
            let _ = Command::new("kill").args(["-KILL", "--", &format!("-{}", php.id())]).status();
            let _ = php.wait();
        }
        let _ = self.db.kill();
        let _ = self.db.wait();
    }
}

fn need(cmd: &str) -> anyhow::Result<String> {
    for dir in ["/usr/sbin", "/usr/bin", "/sbin", "/bin"] {
        let p = Path::new(dir).join(cmd);
        if p.exists() {
            return Ok(p.to_string_lossy().into_owned());
        }
    }
    bail!("{cmd} is missing: scripts/install-deps.sh test installs wordpress, mariadb-server and php-cli")
}

fn run(cmd: &mut Command, what: &str) -> anyhow::Result<String> {
    let out = cmd.output().with_context(|| what.to_string())?;
    ensure!(
        out.status.success(),
        "{what} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn wait_until(what: &str, secs: u64, mut ok: impl FnMut() -> bool) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !ok() {
        ensure!(Instant::now() < deadline, "{what} did not come up within {secs} s");
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
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

impl LocalWordPress {
    /// Installs and starts a fresh site (blocking: call it off an async runtime).
    pub fn start() -> anyhow::Result<LocalWordPress> {
        ensure!(
            Path::new(WP_ROOT).join("wp-settings.php").exists(),
            "{WP_ROOT} is missing: scripts/install-deps.sh test installs Debian's wordpress package"
        );
        let dir = tempfile::tempdir()?;
        let d = dir.path().to_path_buf();
        let (datadir, sock) = (d.join("db"), d.join("mysql.sock"));
        let user = run(Command::new("id").arg("-un"), "id -un")?.trim().to_string();
        run(
            Command::new(need("mariadb-install-db")?).args([
                "--no-defaults",
                &format!("--datadir={}", datadir.display()),
                &format!("--user={user}"),
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
            ]),
            "mariadb-install-db",
        )?;
        let db = Command::new(need("mariadbd")?)
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
            .context("start mariadbd")?;
        // from here on, a failure drops `site`, which stops the database
        let mut site = LocalWordPress { base: String::new(), app_password: String::new(), php: None, db, dir };
        wait_until("mariadbd", 60, || sock.exists())?;
        let client = need("mariadb")?;
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
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        site.base = format!("http://127.0.0.1:{port}");
        docroot(&d.join("site"), &d.join("content"), &sock, &site.base)?;
        let php = need("php")?;
        let out = run(
            Command::new(&php).arg("-r").arg(format!(
                "{}\nwp_install('Harbour Bakery', '{USER}', 'admin@example.com', true, '', 'admin-password-123');\n\
                 $u = get_user_by('login', '{USER}');\nwp_update_user(array('ID' => $u->ID, 'display_name' => '{AUTHOR}'));\n\
                 list($pw, $item) = WP_Application_Passwords::create_new_application_password($u->ID, array('name' => 'steward'));\n\
                 echo $pw, \"\\n\";",
                site.bootstrap_php(true)
            ))
            .stderr(Stdio::null()),
            "wp_install",
        )?;
        site.app_password = out.lines().last().unwrap_or_default().trim().to_string();
        ensure!(site.app_password.len() == 24, "no Application Password from the install: {out}");
        site.php = Some(
            Command::new(&php)
                .args(["-S", &format!("127.0.0.1:{port}"), "-t", &d.join("site").to_string_lossy()])
                .env("PHP_CLI_SERVER_WORKERS", "4")
                .process_group(0)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .context("start php -S")?,
        );
        wait_until("php -S", 30, || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok())?;
        Ok(site)
    }

    /// PHP that loads WordPress from the command line (`installing`: before it is installed).
    fn bootstrap_php(&self, installing: bool) -> String {
        let site = self.dir.path().join("site");
        let host = self.base.trim_start_matches("http://");
        let install = if installing {
            "define('WP_INSTALLING', true);\nrequire_once ABSPATH . 'wp-load.php';\nrequire_once ABSPATH . 'wp-admin/includes/upgrade.php';"
        } else {
            "require_once ABSPATH . 'wp-load.php';"
        };
        format!("define('ABSPATH', '{}/');\n$_SERVER['HTTP_HOST'] = '{host}';\n{install}", site.display())
    }

    /// Publishes `posts` (title, HTML content) as the administrator, straight through WordPress's
    /// PHP API (fast, for benchmarks; the tests seed through the REST API).
    pub fn seed(&self, posts: &[(String, String)]) -> anyhow::Result<()> {
        let file = self.dir.path().join("seed.json");
        let items: Vec<serde_json::Value> =
            posts.iter().map(|(t, c)| serde_json::json!({"title": t, "content": c})).collect();
        std::fs::write(&file, serde_json::to_vec(&items)?)?;
        let script = format!(
            "{}\nwp_set_current_user(1);\nwp_defer_term_counting(true);\n\
             foreach (json_decode(file_get_contents('{}'), true) as $p) {{\n\
               wp_insert_post(array('post_title' => $p['title'], 'post_content' => $p['content'], 'post_status' => 'publish', 'post_author' => 1));\n\
             }}\necho 'ok';",
            self.bootstrap_php(false),
            file.display()
        );
        let out = run(Command::new(need("php")?).arg("-r").arg(script).stderr(Stdio::null()), "seeding posts")?;
        ensure!(out.trim_end().ends_with("ok"), "seeding did not finish: {out}");
        Ok(())
    }
}

/// The document root: WordPress's files (symlinked), this site's `wp-config.php` and
/// `index.php` (which set `ABSPATH` here, so Debian's host-based config is not consulted).
fn docroot(site: &Path, content: &Path, sock: &Path, base: &str) -> anyhow::Result<()> {
    std::fs::create_dir_all(site)?;
    for sub in ["mu-plugins", "plugins", "themes", "uploads"] {
        std::fs::create_dir_all(content.join(sub))?;
    }
    std::fs::write(content.join("mu-plugins/steward-test.php"), MU_PLUGIN)?;
    for e in std::fs::read_dir(WP_ROOT)?.flatten() {
        let name = e.file_name();
        if name == "wp-config.php" || name == "index.php" || name == "wp-content" {
            continue;
        }
        std::os::unix::fs::symlink(e.path(), site.join(&name))?;
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
    )?;
    std::fs::write(
        site.join("index.php"),
        "<?php\ndefine('ABSPATH', __DIR__ . '/');\ndefine('WP_USE_THEMES', false);\nrequire ABSPATH . 'wp-blog-header.php';\n",
    )?;
    Ok(())
}
