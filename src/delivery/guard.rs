//! The SSRF guard: which addresses an outbound delivery may reach.
//!
//! A delivery's host is resolved once; every address it resolves to must be public (not
//! loopback, private, link-local, CGNAT, multicast, unspecified, documentation, benchmarking,
//! reserved or a cloud metadata address, in IPv4 or IPv6, including IPv4-mapped, IPv4-compatible,
//! 6to4 and NAT64 forms of those). The client then connects to the address that was checked, so a
//! second lookup cannot switch it (DNS rebinding). The operator's allow-list admits intranet
//! networks and hosts, and plain `http://` to them.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};

use reqwest::Url;

/// One entry of the operator's allow-list: a network or a host name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllowRule {
    Net(IpAddr, u8),
    Host(String),
}

impl AllowRule {
    /// `10.0.0.0/8`, `fd00::/8`, `192.168.1.20` (one address) or `hooks.intranet.example`.
    pub fn parse(s: &str) -> Result<AllowRule, String> {
        let s = s.trim();
        if let Some((ip, bits)) = s.split_once('/') {
            let ip: IpAddr = ip.parse().map_err(|_| format!("`{s}` is not a network (address/prefix)"))?;
            let max = if ip.is_ipv4() { 32 } else { 128 };
            let bits: u8 =
                bits.parse().ok().filter(|b| *b <= max).ok_or_else(|| format!("`{s}`: bad prefix length"))?;
            return Ok(AllowRule::Net(ip, bits));
        }
        if let Ok(ip) = s.parse::<IpAddr>() {
            return Ok(AllowRule::Net(ip, if ip.is_ipv4() { 32 } else { 128 }));
        }
        let host = s.trim_end_matches('.').to_ascii_lowercase();
        if host.is_empty() || !host.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.') {
            return Err(format!("`{s}` is neither a network nor a host name"));
        }
        Ok(AllowRule::Host(host))
    }

    fn admits_ip(&self, ip: IpAddr) -> bool {
        match (self, ip) {
            (AllowRule::Net(IpAddr::V4(n), bits), IpAddr::V4(a)) => prefix_eq(&n.octets(), &a.octets(), *bits),
            (AllowRule::Net(IpAddr::V6(n), bits), IpAddr::V6(a)) => prefix_eq(&n.octets(), &a.octets(), *bits),
            _ => false,
        }
    }
}

fn prefix_eq(a: &[u8], b: &[u8], bits: u8) -> bool {
    let (full, rest) = ((bits / 8) as usize, bits % 8);
    if a[..full] != b[..full] {
        return false;
    }
    rest == 0 || (a[full] ^ b[full]) >> (8 - rest) == 0
}

/// Why an address is not public, or `None` when it is.
pub fn blocked(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => blocked_v4(v4),
        IpAddr::V6(v6) => blocked_v6(v6),
    }
}

fn blocked_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    Some(match (a, b, c) {
        (0, ..) => "an unspecified (\"this network\") address",
        (10, ..) => "a private address",
        (100, 64..=127, _) => "a shared (CGNAT) address",
        (127, ..) => "a loopback address",
        (169, 254, _) => "a link-local or cloud metadata address",
        // Azure's host agent (the wire server), reachable from every VM
        (168, 63, 129) if ip.octets()[3] == 16 => "a cloud host-agent address",
        (172, 16..=31, _) => "a private address",
        (192, 0, 0) => "an IETF protocol address",
        (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => "a documentation address",
        (192, 88, 99) => "a 6to4 relay address",
        (192, 168, _) => "a private address",
        (198, 18..=19, _) => "a benchmarking address",
        (224..=239, ..) => "a multicast address",
        (240..=255, ..) => "a reserved or broadcast address",
        _ => return None,
    })
}

fn blocked_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let s = ip.segments();
    let embedded = |hi: u16, lo: u16| Ipv4Addr::new((hi >> 8) as u8, hi as u8, (lo >> 8) as u8, lo as u8);
    if ip.is_unspecified() {
        return Some("an unspecified address");
    }
    if ip.is_loopback() {
        return Some("a loopback address");
    }
    // ::ffff:a.b.c.d (mapped) and ::a.b.c.d (compatible, deprecated): judge the IPv4 address
    if s[..5] == [0; 5] && (s[5] == 0xffff || s[5] == 0) {
        return blocked_v4(embedded(s[6], s[7])).or(if s[5] == 0 { Some("an IPv4-compatible address") } else { None });
    }
    // NAT64: 64:ff9b::a.b.c.d reaches the IPv4 address; the local-use prefix 64:ff9b:1::/48 is private
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return blocked_v4(embedded(s[6], s[7]));
    }
    if s[0] == 0x64 && s[1] == 0xff9b && s[2] == 1 {
        return Some("a local-use NAT64 address");
    }
    // 6to4: 2002:abcd:efgh::/48 carries a.b.c.d
    if s[0] == 0x2002 {
        return blocked_v4(embedded(s[1], s[2]));
    }
    Some(match s[0] {
        0x2001 if s[1] == 0 => "a Teredo address",
        0x2001 if s[1] == 0xdb8 => "a documentation address",
        0x3fff if s[1] <= 0x0fff => "a documentation address",
        0x0100 if s[1..4] == [0, 0, 0] => "a discard-only address",
        x if x & 0xfe00 == 0xfc00 => "a unique local (private) address",
        x if x & 0xffc0 == 0xfe80 => "a link-local address",
        x if x & 0xffc0 == 0xfec0 => "a site-local address",
        x if x & 0xff00 == 0xff00 => "a multicast address",
        x if x & 0xe000 != 0x2000 => "an address outside global unicast",
        _ => return None,
    })
}

/// The guard with the operator's allow-list.
#[derive(Debug, Clone, Default)]
pub struct Guard {
    allow: Vec<AllowRule>,
}

impl Guard {
    pub fn new(rules: &[String]) -> Result<Guard, String> {
        Ok(Guard { allow: rules.iter().map(|r| AllowRule::parse(r)).collect::<Result<_, _>>()? })
    }

    fn host_allowed(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        self.allow.iter().any(|r| matches!(r, AllowRule::Host(h) if *h == host))
    }

    fn ip_allowed(&self, ip: IpAddr) -> bool {
        self.allow.iter().any(|r| r.admits_ip(ip))
    }

    /// Checks a URL before anything is sent: the scheme (HTTPS unless the host is allow-listed by
    /// name, or is an address in an allow-listed network), loopback names, and an address
    /// literal. A host name's addresses are checked when it is resolved ([`Guard::check_resolved`],
    /// called by the client's resolver), once, and the connection uses those addresses.
    pub fn check_url(&self, url: &Url) -> Result<(), String> {
        let scheme = url.scheme();
        if scheme != "https" && scheme != "http" {
            return Err(format!("the scheme {scheme}: is not allowed (https only)"));
        }
        let host = url.host_str().ok_or("the URL has no host")?;
        if !url.username().is_empty() || url.password().is_some() {
            return Err(
                "the URL carries a user name or password; put credentials in a header or secret, not the URL".into()
            );
        }
        let literal = match url.host() {
            Some(url::Host::Ipv4(ip)) => Some(IpAddr::V4(ip)),
            Some(url::Host::Ipv6(ip)) => Some(IpAddr::V6(ip)),
            _ => None,
        };
        let allowed = match literal {
            Some(ip) => {
                if let Some(why) = blocked(ip)
                    && !self.ip_allowed(ip)
                {
                    return Err(format!("{ip} is {why}"));
                }
                self.ip_allowed(ip)
            }
            None => {
                let lower = host.trim_end_matches('.').to_ascii_lowercase();
                if (lower == "localhost" || lower.ends_with(".localhost")) && !self.host_allowed(host) {
                    return Err(format!("{host} is a loopback name"));
                }
                self.host_allowed(host)
            }
        };
        if scheme == "http" && !allowed {
            return Err("plain http:// is allowed only to allow-listed hosts; use https://".into());
        }
        Ok(())
    }

    /// Checks the addresses a host name resolved to: every one must be public, unless the name
    /// or the address is allow-listed.
    pub fn check_resolved(&self, host: &str, addrs: &[SocketAddr]) -> Result<(), String> {
        if addrs.is_empty() {
            return Err(format!("{host} resolved to no address"));
        }
        let by_name = self.host_allowed(host);
        for a in addrs {
            if let Some(why) = blocked(a.ip())
                && !by_name
                && !self.ip_allowed(a.ip())
            {
                return Err(format!("{host} resolves to {}, {why}", a.ip()));
            }
        }
        Ok(())
    }

    /// [`Guard::check_url`], then resolves a host name and checks its addresses (for tests and
    /// diagnostics; deliveries resolve inside the client).
    pub fn clear(&self, url: &Url) -> Result<(), String> {
        self.check_url(url)?;
        if let Some(url::Host::Domain(host)) = url.host() {
            let port = url.port_or_known_default().unwrap_or(443);
            let addrs: Vec<SocketAddr> =
                (host, port).to_socket_addrs().map_err(|e| format!("{host} did not resolve: {e}"))?.collect();
            self.check_resolved(host, &addrs)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(g: &Guard, url: &str) -> bool {
        g.clear(&Url::parse(url).unwrap()).is_err()
    }

    /// Every blocked form, with the reason the refusal gives: a table, so a new form is one line.
    #[test]
    fn hostile_targets_are_refused_before_any_connection() {
        let g = Guard::default();
        let hostile = [
            ("https://127.0.0.1/", "loopback"),
            ("https://127.1.2.3:8443/x", "loopback"),
            ("https://[::1]/", "loopback"),
            ("https://0.0.0.0/", "unspecified"),
            ("https://[::]/", "unspecified"),
            ("https://10.0.0.1/", "private"),
            ("https://10.255.255.255/", "private"),
            ("https://172.16.0.1/", "private"),
            ("https://172.31.255.254/", "private"),
            ("https://192.168.0.1/", "private"),
            ("https://169.254.169.254/latest/meta-data/", "metadata"),
            ("https://169.254.0.1/", "link-local"),
            ("https://168.63.129.16/machine?comp=goalstate", "host-agent"),
            ("https://[::ffff:168.63.129.16]/", "host-agent"),
            ("https://[64:ff9b::a83f:8110]/", "host-agent"),
            ("https://[2002:a83f:8110::]/", "host-agent"),
            ("https://100.64.0.1/", "CGNAT"),
            ("https://100.100.100.200/", "CGNAT"),
            ("https://[fd00::1]/", "unique local"),
            ("https://[fc00::1]/", "unique local"),
            ("https://[fe80::1]/", "link-local"),
            ("https://[fd00:ec2::254]/", "unique local"),
            ("https://[::ffff:127.0.0.1]/", "loopback"),
            ("https://[::ffff:169.254.169.254]/", "metadata"),
            ("https://[::ffff:10.0.0.1]/", "private"),
            ("https://[64:ff9b::7f00:1]/", "loopback"),
            ("https://[64:ff9b::a9fe:a9fe]/", "metadata"),
            ("https://[64:ff9b:1::1]/", "NAT64"),
            ("https://[2002:7f00:1::]/", "loopback"),
            ("https://[::127.0.0.1]/", "loopback"),
            ("https://2130706433/", "loopback"),
            ("https://0x7f000001/", "loopback"),
            ("https://017700000001/", "loopback"),
            ("https://0177.0.0.1/", "loopback"),
            ("https://127.1/", "loopback"),
            ("https://localhost/", "loopback name"),
            ("https://api.localhost/", "loopback name"),
            ("https://224.0.0.1/", "multicast"),
            ("https://[ff02::1]/", "multicast"),
            ("https://255.255.255.255/", "reserved"),
            ("https://192.0.2.10/", "documentation"),
            ("https://[2001:db8::1]/", "documentation"),
            ("https://198.18.0.1/", "benchmarking"),
            ("https://user:secret@93.184.215.14/hook", "user name or password"),
            ("https://token@example.com/hook", "user name or password"),
            ("https://:secret@example.com/hook", "user name or password"),
            ("ftp://example.com/", "scheme"),
            ("file:///etc/passwd", "scheme"),
        ];
        for (url, why) in hostile {
            let err = g.clear(&Url::parse(url).unwrap()).expect_err(url);
            assert!(err.contains(why), "{url}: expected a refusal naming `{why}`, got `{err}`");
        }
    }

    #[test]
    fn public_addresses_pass_and_http_needs_the_allow_list() {
        let g = Guard::default();
        assert!(!refused(&g, "https://93.184.215.14/hook"));
        assert!(!refused(&g, "https://[2606:4700::1111]/"));
        assert!(refused(&g, "http://93.184.215.14/hook"), "plain http to the internet");
        let g = Guard::new(&["127.0.0.0/8".into(), "fd00::/8".into(), "hooks.internal".into()]).unwrap();
        assert!(!refused(&g, "https://127.0.0.1:9000/"));
        assert!(!refused(&g, "http://127.0.0.1:9000/"), "http to an allow-listed network");
        assert!(!refused(&g, "https://[fd00::5]/"));
        assert!(refused(&g, "https://10.0.0.1/"), "only what is listed");
        assert!(refused(&g, "https://[::ffff:10.0.0.1]/"));
    }

    #[test]
    fn allow_rules_parse_and_match_prefixes() {
        assert!(AllowRule::parse("10.0.0.0/33").is_err());
        assert!(AllowRule::parse("not a host!").is_err());
        let r = AllowRule::parse("172.16.0.0/12").unwrap();
        assert!(r.admits_ip("172.31.1.1".parse().unwrap()));
        assert!(!r.admits_ip("172.32.0.1".parse().unwrap()));
        assert!(AllowRule::parse("fd00::/8").unwrap().admits_ip("fdff::1".parse().unwrap()));
        assert_eq!(AllowRule::parse("Hooks.Internal.").unwrap(), AllowRule::Host("hooks.internal".into()));
    }
}
