package policycheck

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/idna"
	"golang.org/x/net/publicsuffix"

	"github.com/lazaret-dev/lazaret/internal/engine/netpolicy"
)

// toASCII is host's A-label form ("*." kept), lower case; a name with
// non-ASCII letters goes through IDNA's lookup profile.
func toASCII(host string) (string, error) {
	star := strings.HasPrefix(host, "*.")
	name := strings.TrimPrefix(host, "*.")
	out := strings.ToLower(name)
	if !isASCII(name) {
		a, err := idna.Lookup.ToASCII(name)
		if err != nil {
			return "", err
		}
		out = a
	}
	if star {
		out = "*." + out
	}
	return out, nil
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// wildcardOverSuffix: "*.co.uk", "*.github.io" — every name under a
// public suffix (ICANN's or a private one such as github.io) has its own
// owner.
func wildcardOverSuffix(host string) bool {
	rest, err := toASCII(strings.TrimPrefix(host, "*."))
	if err != nil {
		return false
	}
	rest = strings.TrimSuffix(rest, ".")
	if rest == "" {
		return true
	}
	ps, _ := publicsuffix.PublicSuffix(rest)
	return ps == rest
}

// checkName is every finding about a name pattern in A-label form;
// shown is the form the agent wrote.
func checkName(p Policy, shown, name string) []Finding {
	var out []Finding
	bare := strings.TrimPrefix(name, "*.")
	if name != bare {
		out = append(out, Finding{CodeWildcard, Review,
			fmt.Sprintf("%s covers every name under %s, now and later (%s itself is not included)", name, bare, bare)})
	}
	out = append(out, idnFindings(bare)...)
	out = append(out, secretFindings(p, name)...)
	if site := userContent(bare); site != "" {
		out = append(out, Finding{CodeUserContent, Review,
			fmt.Sprintf("%s serves content its users upload (%s): an allowed agent can fetch or post anything there", bare, site)})
	}
	if covered(p, name) {
		out = append(out, Finding{CodeAlready, Info, "already allowed by the policy"})
	}
	_ = shown
	return out
}

// covered: the policy already opens every name name opens.
func covered(p Policy, name string) bool {
	pol := netpolicy.Policy{}
	for _, d := range p.Domains {
		pol.AllowDomains = append(pol.AllowDomains, netpolicy.Domain{Pattern: d})
	}
	if bare, ok := strings.CutPrefix(name, "*."); ok {
		// every name under bare: covered by an equal or wider wildcard
		return pol.AllowsName("x."+bare) && slices.ContainsFunc(p.Domains, func(d string) bool {
			s, ok := strings.CutPrefix(d, "*.")
			return ok && (s == bare || strings.HasSuffix(bare, "."+s))
		})
	}
	return pol.AllowsName(name)
}

// registrable is the name's registrable domain ("" when it has none).
func registrable(name string) string {
	r, err := publicsuffix.EffectiveTLDPlusOne(strings.TrimPrefix(name, "*."))
	if err != nil {
		return ""
	}
	return r
}

// secretFindings: a name that is, covers or shares a registrable domain
// with a host a secret is injected into. The secret goes only to its own
// hosts, but a neighbour on the same site (a gist, a user page, an
// upload endpoint) can often read what is sent to them.
func secretFindings(p Policy, name string) []Finding {
	var out []Finding
	reg := registrable(name)
	for _, h := range p.SecretHosts {
		h = strings.ToLower(h)
		switch {
		case matches(name, h) || matches(h, name):
			out = append(out, Finding{CodeSecretHost, Review, fmt.Sprintf("a secret is injected into %s: opening %s lets the agent reach it with the secret", h, name)})
		case reg != "" && reg == registrable(h):
			out = append(out, Finding{CodeSecretHost, Review, fmt.Sprintf("%s shares %s with %s, a secret's host", name, reg, h)})
		default:
			continue
		}
		return out // one finding is enough to send it to a human
	}
	return out
}

// matches reports whether pattern (exact or "*." suffix) covers name
// (itself a name or a pattern).
func matches(pattern, name string) bool {
	name = strings.TrimPrefix(name, "*.")
	if s, ok := strings.CutPrefix(pattern, "*."); ok {
		return strings.HasSuffix(name, "."+s)
	}
	return pattern == name
}

// idnFindings: a name whose labels mix scripts, or whose letters are
// look-alikes of Latin ones (an IDN homograph of an ASCII name).
func idnFindings(ascii string) []Finding {
	if !strings.Contains(ascii, "xn--") {
		return nil
	}
	u, err := idna.Lookup.ToUnicode(ascii)
	if err != nil {
		return []Finding{{CodeLookAlike, Refuse, fmt.Sprintf("%s is not a valid internationalized name", ascii)}}
	}
	var out []Finding
	for _, label := range strings.Split(u, ".") {
		if scripts := scriptsOf(label); len(scripts) > 1 {
			out = append(out, Finding{CodeMixedScripts, Review,
				fmt.Sprintf("%s (%s) mixes scripts in one label (%s)", ascii, quote(u), strings.Join(scripts, ", "))})
			break
		}
	}
	if sk := skeleton(u); sk != u && isASCII(sk) {
		out = append(out, Finding{CodeLookAlike, Review,
			fmt.Sprintf("%s (%s) looks like %s but is another name", ascii, quote(u), sk)})
	}
	return out
}

// scriptsOf names the scripts of label's letters, in a fixed order.
func scriptsOf(label string) []string {
	var out []string
	for _, s := range scriptOrder {
		for _, r := range label {
			if unicode.Is(s.table, r) {
				out = append(out, s.name)
				break
			}
		}
	}
	return out
}

var scriptOrder = []struct {
	name  string
	table *unicode.RangeTable
}{
	{"Latin", unicode.Latin}, {"Cyrillic", unicode.Cyrillic}, {"Greek", unicode.Greek}, {"Armenian", unicode.Armenian},
	{"Cherokee", unicode.Cherokee}, {"Han", unicode.Han}, {"Hiragana", unicode.Hiragana}, {"Katakana", unicode.Katakana},
	{"Hangul", unicode.Hangul}, {"Arabic", unicode.Arabic}, {"Hebrew", unicode.Hebrew}, {"Georgian", unicode.Georgian},
}

// skeleton maps the letters that look like Latin ones to them (a subset
// of Unicode's confusables: the Cyrillic, Greek and Armenian letters
// used in homograph attacks, and the Latin ones with invisible marks).
func skeleton(s string) string {
	var b strings.Builder
	for _, r := range s {
		if l, ok := confusables[r]; ok {
			b.WriteRune(l)
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

var confusables = map[rune]rune{
	// Cyrillic
	'а': 'a', 'в': 'b', 'с': 'c', 'ԁ': 'd', 'е': 'e', 'һ': 'h', 'і': 'i', 'ј': 'j', 'к': 'k', 'ӏ': 'l', 'м': 'm',
	'п': 'n', 'о': 'o', 'р': 'p', 'ԛ': 'q', 'г': 'r', 'ѕ': 's', 'т': 't', 'ц': 'u', 'ѵ': 'v', 'ԝ': 'w', 'х': 'x',
	'у': 'y', 'ʐ': 'z', 'ё': 'e', 'ї': 'i', 'ӧ': 'o', 'ԍ': 'g',
	// Greek
	'α': 'a', 'β': 'b', 'ϲ': 'c', 'ε': 'e', 'η': 'n', 'ι': 'i', 'κ': 'k', 'ν': 'v', 'ο': 'o', 'ρ': 'p', 'τ': 't',
	'υ': 'u', 'χ': 'x', 'γ': 'y', 'ω': 'w', 'ϳ': 'j',
	// Armenian
	'օ': 'o', 'ս': 'u', 'ց': 'g', 'հ': 'h', 'ո': 'n', 'զ': 'q',
	// Latin look-alikes
	'ı': 'i', 'ɡ': 'g', 'ɩ': 'i', 'ʟ': 'l', 'ᴅ': 'd', 'ⅼ': 'l', 'ℓ': 'l',
}

// userContentSites are registrable domains and hosts where anyone can
// publish or fetch content (docs/POLICY.md lists them and why): opening
// one is opening a channel in and out for whatever an agent was told to
// fetch or leak. Matched on the name or its registrable domain.
var userContentSites = []string{
	"githubusercontent.com", "gist.github.com", "github.io", "gitlab.io", "bitbucket.io",
	"pastebin.com", "paste.ee", "hastebin.com", "ghostbin.com", "dpaste.org", "termbin.com", "ix.io", "0x0.st",
	"transfer.sh", "file.io", "tmpfiles.org", "catbox.moe", "wetransfer.com", "mega.nz", "mediafire.com",
	"dropbox.com", "dropboxusercontent.com", "box.com", "drive.google.com", "docs.google.com", "googleusercontent.com",
	"storage.googleapis.com", "s3.amazonaws.com", "amazonaws.com", "blob.core.windows.net", "r2.dev", "r2.cloudflarestorage.com",
	"workers.dev", "pages.dev", "trycloudflare.com", "ngrok.io", "ngrok-free.app", "ngrok.app", "loca.lt", "serveo.net",
	"vercel.app", "netlify.app", "herokuapp.com", "glitch.me", "repl.co", "replit.dev", "fly.dev", "onrender.com",
	"webhook.site", "requestbin.com", "pipedream.net", "beeceptor.com", "hookbin.com", "ptsv2.com",
	"discord.com", "discordapp.com", "cdn.discordapp.com", "telegram.org", "t.me", "slack.com", "hooks.slack.com",
	"imgur.com", "ibb.co", "postimg.cc", "notion.site", "sharepoint.com", "1drv.ms", "onedrive.live.com",
	"huggingface.co", "kaggle.com", "npm.im", "jsdelivr.net", "unpkg.com", "raw.githack.com", "statically.io",
}

// userContent names the listed site name is on, "" if none.
func userContent(name string) string {
	reg := registrable(name)
	for _, s := range userContentSites {
		if name == s || strings.HasSuffix(name, "."+s) || (reg != "" && reg == s) {
			return s
		}
	}
	return ""
}
