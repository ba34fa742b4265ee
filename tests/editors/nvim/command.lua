-- Headless Neovim (0.7+) runs one of the plugin's user commands; run by tests/editors/test_lsp_nvim.py:
--
--   nvim --headless -u NONE -i NONE -c "luafile tests/editors/nvim/command.lua" -c "cquit 3"
--
-- Environment: INFILL_PLUGIN, INFILL_CMD, INFILL_INIT, INFILL_FILE, INFILL_REPORT as for
-- fill_action.lua, and
--   INFILL_COMMAND   the command, e.g. "InfillFill", "InfillDoc!"
--   INFILL_SELECT    where: "cursor:L:C" (the cursor on line L, byte column C), "lines:L1-L2"
--                    (a linewise selection, `V`), "chars:L1:C1-L2:C2" (a charwise selection,
--                    `v`, from byte column C1 of line L1 to C2 of L2, both included); lines are
--                    1-based, columns 0-based; a selection runs the command as :'<,'>COMMAND;
--                    "diagnostic:TEXT" (the cursor at the start of the diagnostic over TEXT)
--   INFILL_PICK      for a menu (vim.ui.select, :InfillAlternatives): the item to choose (1-based)
--   INFILL_WAIT_DIAGNOSTICS  if set, wait for the server's diagnostics first (they go in the
--                    report: lnum, col, end_lnum, end_col, severity, source, message, code)
--
-- Waits until the command has finished (the plugin's `busy` flag), writes the buffer and quits:
-- exit status 0 when the command reports success, 1 otherwise (the report says why), 3 if the
-- script itself died before quitting.

local report = { steps = {} }

local function step(name)
  table.insert(report.steps, name)
end

local function check(condition, message)
  if not condition then
    error(message, 0)
  end
  return condition
end

local function select(spec, buf)
  local kind, rest = spec:match('^(%a+):(.*)$')
  check(kind, 'INFILL_SELECT must be cursor:..., lines:..., chars:... or diagnostic:...')
  if kind == 'diagnostic' then
    for _, d in ipairs(vim.diagnostic.get(buf)) do
      local line = vim.api.nvim_buf_get_lines(buf, d.lnum, d.lnum + 1, false)[1] or ''
      if d.lnum == d.end_lnum and line:sub(d.col + 1, d.end_col) == rest then
        vim.api.nvim_win_set_cursor(0, { d.lnum + 1, d.col })
        return ''
      end
    end
    error('no diagnostic over ' .. rest, 0)
  end
  if kind == 'cursor' then
    local line, col = rest:match('^(%d+):(%d+)$')
    vim.api.nvim_win_set_cursor(0, { tonumber(line), tonumber(col) })
    return ''
  end
  if kind == 'lines' then
    local first, last = rest:match('^(%d+)%-(%d+)$')
    vim.cmd('normal! V\27') -- the last visual mode: linewise
    vim.fn.setpos("'<", { 0, tonumber(first), 1, 0 })
    vim.fn.setpos("'>", { 0, tonumber(last), 1, 0 })
    return "'<,'>"
  end
  local l1, c1, l2, c2 = rest:match('^(%d+):(%d+)%-(%d+):(%d+)$')
  check(l1, 'chars:L1:C1-L2:C2 expected')
  vim.cmd('normal! v\27') -- the last visual mode: charwise
  vim.fn.setpos("'<", { 0, tonumber(l1), tonumber(c1) + 1, 0 })
  vim.fn.setpos("'>", { 0, tonumber(l2), tonumber(c2) + 1, 0 })
  return "'<,'>"
end

local function main()
  vim.opt.runtimepath:prepend(check(os.getenv('INFILL_PLUGIN'), 'INFILL_PLUGIN is not set'))
  local cmd = vim.fn.json_decode(check(os.getenv('INFILL_CMD'), 'INFILL_CMD is not set'))
  local init_options = vim.fn.json_decode(os.getenv('INFILL_INIT') or '{}')
  vim.cmd('edit ' .. vim.fn.fnameescape(check(os.getenv('INFILL_FILE'), 'INFILL_FILE is not set')))
  local buf = vim.api.nvim_get_current_buf()
  local infill = require('infill')
  infill.setup { cmd = cmd, init_options = init_options }
  -- -u NONE: no filetype detection; setting it attaches the client
  vim.cmd('set filetype=' .. (os.getenv('INFILL_FILETYPE') or 'python'))
  local client = check(vim.lsp.get_client_by_id(check(infill.client_id, 'no client')), 'no client')
  check(vim.wait(60000, function() return client.initialized end, 20), 'the server never initialized')
  step('initialized')
  if os.getenv('INFILL_WAIT_DIAGNOSTICS') then
    check(vim.wait(150000, function() return #vim.diagnostic.get(buf) > 0 end, 20), 'no diagnostics')
    report.diagnostics = vim.tbl_map(function(d)
      local lsp = (d.user_data or {}).lsp or {}
      return { lnum = d.lnum, col = d.col, end_lnum = d.end_lnum, end_col = d.end_col, severity = d.severity,
               source = d.source, message = d.message, code = d.code or lsp.code }
    end, vim.diagnostic.get(buf))
    step('diagnostics')
  end

  local pick = tonumber(os.getenv('INFILL_PICK') or '1')
  vim.ui.select = function(items, opts, on_choice) -- the menu, answered as a user would
    report.menu = vim.tbl_map(opts.format_item or tostring, items)
    on_choice(items[pick], pick)
  end

  local range = select(check(os.getenv('INFILL_SELECT'), 'INFILL_SELECT is not set'), buf)
  vim.cmd(range .. check(os.getenv('INFILL_COMMAND'), 'INFILL_COMMAND is not set'))
  step('ran')
  check(vim.wait(180000, function() return not infill.busy and infill.last ~= nil end, 20), 'no answer')
  report.last = infill.last
  check(infill.last.ok, 'the command failed: ' .. tostring(infill.last.message))
  step('done')
  vim.cmd('write')
  step('written')
end

local ok, err = pcall(main)
report.ok = ok
if not ok then
  report.error = tostring(err)
  io.stderr:write('command.lua: ' .. tostring(err) .. '\n')
end
pcall(function()
  local file = assert(io.open(os.getenv('INFILL_REPORT'), 'w'))
  file:write(vim.fn.json_encode(report))
  file:close()
end)
local clients = vim.lsp.get_active_clients()
for _, client in pairs(clients) do
  client.stop()
end
vim.wait(5000, function()
  for _, client in pairs(clients) do
    if not client.is_stopped() then
      return false
    end
  end
  return true
end, 20)
vim.cmd(ok and 'qall!' or 'cquit 1')
