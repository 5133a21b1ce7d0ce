package cli

import (
	ucli "github.com/urfave/cli/v2"

	"github.com/chart-upgrader/chart-upgrader/internal/channel"
)

func channelCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "channel",
		Usage: "serve system-upgrade-controller channels from a Helm repository",
		Subcommands: []*ucli.Command{{
			Name:  "serve",
			Usage: "answer GET /v1/channels/NAME with a 302 to the newest chart version the channel allows",
			Description: "The config file names the source (a Helm repository URL or a directory of charts),\n" +
				"the chart, the index ttl, the channels (name: constraint, or name: {constraint, devel})\n" +
				"and an optional baseURL for the Location. Also: GET /v1/channels (JSON), /healthz.\n" +
				"Stops gracefully on SIGTERM.",
			Flags: []ucli.Flag{
				&ucli.StringFlag{TakesFile: true, Name: "config", Usage: "channel server configuration `FILE`"},
				&ucli.StringFlag{Name: "listen", Value: ":8080", Usage: "`ADDRESS` to listen on"},
				&ucli.StringFlag{Name: "log-format", Value: "auto", Usage: "`FORMAT` of the logs on stderr: text, json, or auto (text on a terminal)"},
			},
			Action: func(c *ucli.Context) error {
				cfg, err := channel.LoadConfig(c.String("config"))
				if err != nil {
					return err
				}
				srv, err := channel.NewServer(*cfg, logger(c.App.ErrWriter, c.String("log-format")))
				if err != nil {
					return err
				}
				return srv.Serve(c.Context, c.String("listen"))
			},
		}},
	}
}
