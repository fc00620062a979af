package conf

import (
	"io"
	"path/filepath"
)

// Dump writes every file the configuration was read from, each after a
// "# configuration file NAME:" line, as nginx -T does.
func (c *Config) Dump(w io.Writer) error {
	for _, src := range c.Sources {
		if _, err := io.WriteString(w, "# configuration file "+src.Name+":\n"); err != nil {
			return err
		}
		w.Write(src.Content)
		if len(src.Content) > 0 && src.Content[len(src.Content)-1] != '\n' {
			io.WriteString(w, "\n")
		}
		io.WriteString(w, "\n")
	}
	return nil
}

// MainFile resolves the main file's name as Load does: against the prefix, which
// defaults to the working directory.
func MainFile(prefix, file string) (string, error) {
	if prefix == "" {
		prefix = "."
	}
	prefix, err := filepath.Abs(prefix)
	if err != nil {
		return "", err
	}
	if filepath.IsAbs(file) {
		return file, nil
	}
	return filepath.Join(prefix, file), nil
}
